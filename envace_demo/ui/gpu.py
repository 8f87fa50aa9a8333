"""GPU placement for the app: ``@gpu(seconds)`` and loading the model where the hardware wants it.

``@gpu`` is ZeroGPU's ``spaces.GPU`` on a Space (itself a no-op off ZeroGPU) and a no-op
where ``spaces`` is not installed. Every duration it requests is bounded by
``max_seconds`` (``ENVACE_GPU_SECONDS``, 120 by default): a request beyond a visitor's
ZeroGPU quota is refused outright, so no episode may ask for more.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

# First: on ZeroGPU, `spaces` must patch torch before anything imports it.
try:  # the `spaces` package exists on Hugging Face Spaces only
    import spaces as _spaces
except ImportError:
    _spaces = None

from envace_demo.errors import EnvaceError  # noqa: E402
from envace_demo.models.hardware import resolve  # noqa: E402
from envace_demo.settings import Settings  # noqa: E402
from envace_demo.ui.holder import Loader, ModelHolder  # noqa: E402

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_MAX_SECONDS = Settings().gpu_seconds
_max_seconds = DEFAULT_MAX_SECONDS
# Every GPU function (qualified name -> the bounded duration it requests), for the tests.
GPU_FUNCTIONS: dict[str, Callable[..., int]] = {}


def set_max_seconds(seconds: int) -> None:
    global _max_seconds
    _max_seconds = int(seconds)


def gpu(seconds: int | Callable[..., int]) -> Callable[[F], F]:
    """Request a GPU for ``seconds`` per call (at most ``max_seconds``); a callable gets
    the call's arguments, so the request follows that call's own budget."""

    def duration(*args: Any, **kwargs: Any) -> int:
        wanted = seconds(*args, **kwargs) if callable(seconds) else seconds
        return max(1, min(int(wanted), _max_seconds))

    def decorate(fn: F) -> F:
        GPU_FUNCTIONS[f"{fn.__module__}.{fn.__qualname__}"] = duration
        if _spaces is None:
            return fn
        return _spaces.GPU(duration=duration)(fn)

    return decorate


def start_model(settings: Settings, loader: Loader | None = None) -> tuple[Settings, ModelHolder]:
    """Decide the model for this hardware and start loading it: on ZeroGPU right here,
    blocking, in the calling (main) thread, since ZeroGPU wants the weights on cuda at
    import and its CUDA emulation is thread-local; elsewhere in the background, so the
    page serves at once. Returns the settings with the choices made, and the holder.

    A decision that fails (a GPU was expected and CUDA is unusable) loads nothing: the
    holder fails with that message, which the page shows."""
    load_here = False
    if settings.backend == "transformers":
        try:
            settings, plan = resolve(settings)
        except EnvaceError as err:
            loader = _raise(err)
        else:
            load_here = plan.load_at_import
    set_max_seconds(settings.gpu_seconds)
    holder = ModelHolder(settings, loader=loader)
    if load_here:
        holder.load_here()
    else:
        holder.start()
    return settings, holder


def _raise(err: EnvaceError) -> Loader:
    def loader(settings: Settings) -> Any:
        raise err

    return loader
