"""The settings of one fine-tuning run: one dataclass, checked on creation.

Field metadata carries the help text the CLI shows. Defaults follow the paper's
reference run where it applies at demo scale (group size 4, clip 0.2, no KL, no
std scaling, one optimizer step per batch, temperature 1.0 in rollouts); the
learning rate is LoRA's (1e-4..1e-3), not the paper's full-model 1e-6.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from envace_demo.errors import ConfigError


@dataclass(frozen=True)
class TrainConfig:
    steps: int = field(default=8, metadata={"help": "optimizer steps"})
    group_size: int = field(default=4, metadata={"help": "rollouts per prompt (n in the paper)"})
    prompts_per_step: int = field(default=2, metadata={"help": "training tasks per step (one group each)"})
    lr: float = field(default=5e-4, metadata={"help": "AdamW learning rate of the LoRA weights"})
    lora_rank: int = field(default=8, metadata={"help": "LoRA rank r (alpha = 2r)"})
    lora_layers: int | None = field(
        default=None,
        metadata={
            "help": "put LoRA on the last N decoder layers only (default: all). Backward then stops "
            "N layers down: a large saving on CPU, still an exact gradient for those weights"
        },
    )
    beta: float = field(
        default=0.0, metadata={"help": "k3 KL weight to the base model (adapter off); 0 = no KL"}
    )
    clip_eps: float = field(
        default=0.2, metadata={"help": "PPO clip range of the ratio to the rollout policy (acts from the 2nd update on)"}
    )
    updates_per_batch: int = field(
        default=1,
        metadata={
            "help": "optimizer steps on each batch of rollouts; above 1 the ratio to the rollout's "
            "log-probs moves and the clip bounds it"
        },
    )
    scale_std: bool = field(default=False, metadata={"help": "divide advantages by the group-role std"})
    empty_penalty: float = field(
        default=0.1, metadata={"help": "subtracted from the reward of an empty generation"}
    )
    temperature: float = field(default=1.0, metadata={"help": "rollout sampling temperature"})
    max_new_tokens: int = field(
        default=64, metadata={"help": "new tokens per generation in rollouts and evaluation"}
    )
    max_turns: int = field(default=1, metadata={"help": "actor turns per rollout and per evaluation episode"})
    max_grad_norm: float = field(default=1.0, metadata={"help": "gradient clipping; 0 = off"})
    micro_batch: int = field(default=8, metadata={"help": "rows per forward/backward pass"})
    seed: int = field(default=0, metadata={"help": "seed of task order, rollouts and evaluation"})
    eval_samples: int = field(
        default=1, metadata={"help": "episodes per held-out task and mode (same seeds before and after)"}
    )
    eval_rehearsals: int = field(
        default=1, metadata={"help": "rehearsals N of the 'with rehearsal' evaluation; 0 = skip it"}
    )
    eval_temperature: float = field(default=0.0, metadata={"help": "evaluation temperature; 0 = greedy"})
    require_first_call: bool = field(
        default=True,
        metadata={
            "help": "the first actor turn must call a tool (the small model answers in prose otherwise)"
        },
    )
    constrained: bool = field(
        default=True, metadata={"help": "constrained decoding where the backend supports it"}
    )

    def __post_init__(self) -> None:
        positive = (
            "steps",
            "group_size",
            "prompts_per_step",
            "lora_rank",
            "max_new_tokens",
            "max_turns",
            "micro_batch",
            "eval_samples",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(f"train.{name} must be at least 1, not {getattr(self, name)}")
        if self.group_size < 2:
            raise ConfigError(
                f"train.group_size must be at least 2 (a baseline needs two rollouts), not {self.group_size}"
            )
        if not 0 < self.lr < 1:
            raise ConfigError(f"train.lr must be in (0, 1), not {self.lr}; LoRA usually wants 1e-4..1e-3")
        if self.lora_layers is not None and self.lora_layers < 1:
            raise ConfigError(
                f"train.lora_layers must be at least 1 or unset (all layers), not {self.lora_layers}"
            )
        if self.updates_per_batch < 1:
            raise ConfigError("train.updates_per_batch must be at least 1")
        if self.beta < 0 or self.clip_eps <= 0 or self.empty_penalty < 0 or self.max_grad_norm < 0:
            raise ConfigError("train.beta, empty_penalty and max_grad_norm must be >= 0, clip_eps > 0")
        if self.temperature <= 0:
            raise ConfigError(f"train.temperature must be > 0 (rollouts sample), not {self.temperature}")
        if self.eval_rehearsals < 0 or self.eval_temperature < 0:
            raise ConfigError("train.eval_rehearsals and eval_temperature must be >= 0")

    @classmethod
    def cpu_recipe(cls, **overrides) -> TrainConfig:
        """Settings measured to raise held-out success of the embedded 135M model on
        the bank drills (``data.drill_tasks("bank")``) in about five CPU minutes:
        one task per step, LoRA on the last 4 layers at a high LoRA learning rate,
        rollouts at temperature 0.7 (at 1.0 most of the small model's calls are
        invalid, so groups rarely differ), evaluation without rehearsal only."""
        recipe = {
            "steps": 4,
            "group_size": 4,
            "prompts_per_step": 1,
            "lr": 3e-3,
            "lora_layers": 4,
            "temperature": 0.7,
            "max_new_tokens": 64,
            "eval_rehearsals": 0,
        }
        return cls(**{**recipe, **overrides})

    @classmethod
    def for_device(cls, device: str, **overrides) -> TrainConfig:
        """The CPU recipe on CPU (small, measured there), the paper-like defaults elsewhere."""
        return cls.cpu_recipe(**overrides) if device == "cpu" else cls(**overrides)

    def fitted_to(self, backend) -> TrainConfig:
        """This config as ``backend`` can run it: constrained decoding only where it has
        grammars, a first call required where the model needs one to act at all."""
        return replace(
            self,
            constrained=self.constrained and backend.supports_constraints,
            require_first_call=backend.requires_first_call,
        )

    def to_dict(self) -> dict:
        return asdict(self)
