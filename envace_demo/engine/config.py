"""What one episode runs: its mode, its budget, and how rehearsal feeds the committed run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from envace_demo.errors import ConfigError
from envace_demo.models.base import Backend, Sampling
from envace_demo.modes import MODES
from envace_demo.record import ToolCall

# What the committed actor may read of the rehearsal memory (``EpisodeConfig.memory``).
MEMORY_VIEWS = ("outcomes", "full", "off")


@dataclass
class EpisodeConfig:
    mode: str = "parallel"
    n: int = 2
    sampling: Sampling = field(default_factory=Sampling)
    max_steps: int = 6
    episode_seconds: float = 600.0
    # The share of ``episode_seconds`` the rehearsals may spend before the committed run
    # (whose reserve is the rest). Modes without a committed run (imagine) use it all.
    rehearsal_share: float = 0.5
    # One real call's limit. Above the MCP per-request timeout (30 s), whose own error is clearer.
    tool_seconds: float = 60.0
    constrained: bool = True
    # The first actor turn must call a tool: small models otherwise answer in prose.
    require_first_call: bool = False
    # Reasoning bound (characters) under constrained decoding; None: the backend's own.
    # Fitted to the model's speed (budget.py): 0 on a machine where reasoning costs the minute.
    think_chars: int | None = None
    # The declared response schema as one extra line of the rehearser's message; None: on only
    # for models EnvACE did not train (the trained ones never saw that line).
    response_schema: bool | None = None
    # Real (call, result) pairs from this visitor's earlier episodes on the same environment
    # (reads made before any write, so they hold in the fresh state every episode starts
    # from): the rehearser's few-shot, before this episode's own real results.
    known_results: tuple[tuple[ToolCall, Any], ...] = field(default=(), compare=False)
    # Run on the served model's base weights, its adapter switched off (Compare's base side).
    base_weights: bool = False
    # Whether a first rehearsal may predict a domain failure; None: where the model was
    # trained to rehearse (grammar.rehearses_failures).
    rehearse_failures: bool | None = None
    # The committed actor stops reading the rehearsal memory once a real response contradicts
    # its rehearsal: a failure where success was rehearsed (or the reverse), or a fidelity
    # below this. A small model copies the memory's values and repeats its calls (a refused
    # transfer sent again, a copy written with the rehearsed content); None: keep it.
    memory_fidelity_floor: float | None = 0.75
    # What the committed actor reads of the rehearsals: "outcomes" (each rehearsed call and
    # whether it was predicted to succeed or which error: which calls to make, not what to
    # tell the user), "full" (the predicted values too), or "off".
    memory: str = "outcomes"
    # A committed call whose rehearsal predicts a failure is held the first time: not
    # executed, the actor shown the prediction, so it can take another path (a call asked
    # again runs for real: the rehearsal may be wrong).
    hold_predicted_failures: bool = True
    # Turns an exception's text into what the record may show (public mode hides server paths
    # and secrets); None shows it as is.
    redact: Callable[[str], str] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        if self.mode in ("parallel", "sequential", "imagine") and not 1 <= self.n <= 64:
            raise ConfigError(f"n must be between 1 and 64, not {self.n}")
        if not self.tool_seconds > 0:
            raise ConfigError(f"tool_seconds must be positive, not {self.tool_seconds}")
        if not 0 < self.rehearsal_share < 1:
            raise ConfigError(f"rehearsal_share must be between 0 and 1 (exclusive), not {self.rehearsal_share}")
        if self.memory not in MEMORY_VIEWS:
            raise ConfigError(f"memory must be one of {', '.join(MEMORY_VIEWS)}, not {self.memory!r}")
        if self.memory_fidelity_floor is not None and not 0 <= self.memory_fidelity_floor <= 1:
            raise ConfigError(f"memory_fidelity_floor must be between 0 and 1, not {self.memory_fidelity_floor}")

    @classmethod
    def for_backend(cls, backend: Backend, *, constrained: bool = True, require_first_call: bool | None = None,
                    **values: Any) -> "EpisodeConfig":
        """A config that asks of ``backend`` only what it can do: constrained decoding where it
        supports it; a required first call where it needs one, unless said otherwise."""
        first = backend.requires_first_call if require_first_call is None else require_first_call
        return cls(constrained=constrained and backend.supports_constraints, require_first_call=first, **values)
