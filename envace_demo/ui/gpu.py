"""GPU placement for the app: ``@gpu(seconds)``, what one ZeroGPU call may ask for, and
loading the model where the hardware wants it.

``@gpu`` is ZeroGPU's ``spaces.GPU`` on a Space (itself a no-op off ZeroGPU) and a no-op
where ``spaces`` is not installed. ZeroGPU checks each request against the visitor's quota
left (an anonymous visitor has about 2 minutes a day) after multiplying it by its
hardware's duration factor (1.5 on today's hardware, spaces' ``zero/configs.json``). So
every duration asked is computed from that call's own budget and bounded by
``max_seconds``: ``ENVACE_GPU_SECONDS`` (60 by default, what a call may be scheduled for)
divided by the factor. A call on the whole card (size xlarge, where the plan puts the 8B so
that it rehearses) is scheduled as asked and checked twice against the quota.
"""

from __future__ import annotations

import functools
import inspect
from contextlib import contextmanager
from typing import Any, Callable, Iterator, TypeVar

# First: on ZeroGPU, `spaces` must patch torch before anything imports it.
try:  # the `spaces` package exists on Hugging Face Spaces only
    import spaces as _spaces
except ImportError:
    _spaces = None

from envace_demo import budget as budget_mod  # noqa: E402
from envace_demo.errors import EnvaceError  # noqa: E402
from envace_demo.models import hardware  # noqa: E402
from envace_demo.models.hardware import GPU_MARGIN_SECONDS, zero_call_seconds  # noqa: E402
from envace_demo.plan import FLAVORS  # noqa: E402
from envace_demo.plan.zerogpu import XLARGE_QUOTA_FACTOR, ZERO_SIZES, call_size, size_factor  # noqa: E402
from envace_demo.settings import Settings  # noqa: E402
from envace_demo.ui.holder import Loader, Measure, ModelHolder, budget_of  # noqa: E402

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_MAX_SECONDS = zero_call_seconds(Settings())
_max_seconds = DEFAULT_MAX_SECONDS
_zero_gpu = False  # bound calls to what a visitor's quota holds (ZeroGPU only)
_size = ZERO_SIZES[0]  # ZeroGPU: the size every GPU call asks for (configure: the plan's)
# Every GPU function (qualified name -> the bounded duration it requests), for the tests.
GPU_FUNCTIONS: dict[str, Callable[..., int]] = {}


def duration_factor() -> float:
    """What spaces multiplies a request by: its live config where spaces runs ZeroGPU (it
    reads the card from the driver), else today's ZeroGPU hardware's (the plan's); a call
    on the whole card (size xlarge) is scheduled as asked."""
    if _size == "xlarge":
        return size_factor(FLAVORS["zero-a10g"], _size)
    if _spaces is not None and _zero_gpu:
        try:
            from spaces.config import Config
            from spaces.zero.config import get_config

            if Config.zero_gpu:
                return float(get_config()["duration_factor"])
        except (ImportError, KeyError):  # an older spaces without per-hardware configs
            pass
    return FLAVORS["zero-a10g"].duration_factor


def set_max_seconds(seconds: int) -> None:
    global _max_seconds
    _max_seconds = int(seconds)


def configure(settings: Settings) -> None:
    """Bound GPU calls for ``settings``: on ZeroGPU to what one call may be scheduled for."""
    global _zero_gpu, _size
    _zero_gpu = settings.zero_gpu
    _size = call_size(settings.gpu_size)
    set_max_seconds(zero_call_seconds(settings, duration_factor()))


def gpu_size() -> str:
    """The size every GPU call asks spaces for ("large": half a card; "xlarge": the whole)."""
    return _size


def call_episode_seconds() -> float | None:
    """The longest episode one GPU call holds on ZeroGPU (None elsewhere: no bound)."""
    return float(_max_seconds - GPU_MARGIN_SECONDS) if _zero_gpu else None


def scheduled_seconds(duration: int) -> int:
    """What spaces schedules for a ``duration`` request."""
    return round(duration * duration_factor())


def quota_seconds(duration: int) -> int:
    """What spaces checks against the visitor's quota for a ``duration`` request."""
    return scheduled_seconds(duration) * (XLARGE_QUOTA_FACTOR if _size == "xlarge" else 1)


def bounded(seconds: float) -> int:
    """A request of ``seconds``, as asked of spaces: whole seconds, at most ``max_seconds``."""
    return max(1, min(int(seconds), _max_seconds))


def gpu(seconds: int | Callable[..., int]) -> Callable[[F], F]:
    """Request a GPU for ``seconds`` per call (at most ``max_seconds``); a callable gets
    the call's arguments, so the request follows that call's own budget."""

    def duration(*args: Any, **kwargs: Any) -> int:
        return bounded(seconds(*args, **kwargs) if callable(seconds) else seconds)

    def decorate(fn: F) -> F:
        GPU_FUNCTIONS[f"{fn.__module__}.{fn.__qualname__}"] = duration
        if _spaces is None:
            return fn
        # spaces fixes a function's size when it is decorated, before the plan has chosen
        # one (configure): so one copy a size, and each call goes to the chosen one's.
        sized = {size: _spaces.GPU(duration=duration, size=size)(_forward(lambda: fn, fn)) for size in ZERO_SIZES}
        return _forward(lambda: sized[_size], fn)  # type: ignore[return-value]

    return decorate


def _forward(target: Callable[[], Callable], like: Callable) -> Callable:
    """A new function that calls ``target()`` (spaces keeps one decoration per function, so
    each size needs its own), a generator function where ``like`` is one (spaces and gradio
    stream those)."""
    if inspect.isgeneratorfunction(like):

        def forward(*args: Any, **kwargs: Any) -> Any:
            return (yield from target()(*args, **kwargs))
    else:

        def forward(*args: Any, **kwargs: Any) -> Any:
            return target()(*args, **kwargs)

    return functools.wraps(like)(forward)


# A refusal of spaces' scheduler is a gradio Error titled like these.
REFUSALS = ("ZeroGPU quota exceeded", "ZeroGPU illegal duration", "ZeroGPU queue timeout", "ZeroGPU pending credits")


def refusal_hint(asked: int | None = None) -> str:
    asked_text = ""
    if asked is not None:
        asked_text = f"this run asked for {asked} s, scheduled as {scheduled_seconds(asked)} s"
        if _size == "xlarge":
            asked_text += f" on a whole card, {quota_seconds(asked)} s of the quota"
        asked_text += "; "
    return (
        f"{asked_text}a smaller N or fewer steps asks for less, and signing in to Hugging Face "
        "gives a larger daily quota (or run the demo on your own GPU: see docs/deploy.md)"
    )


@contextmanager
def explained_refusals(asked: int | None = None) -> Iterator[None]:
    """spaces' refusal of a GPU call (quota, duration), shown with its own message, the
    quota it states, and a way on."""
    try:
        yield
    except Exception as err:
        title = str(getattr(err, "title", "") or "")
        if not any(title.startswith(r) for r in REFUSALS):
            raise
        import gradio as gr

        message = str(getattr(err, "message", err))
        raise gr.Error(f"{message} — {refusal_hint(asked)}", title=title) from err


def start_model(
    settings: Settings, loader: Loader | None = None, measure: Measure | None = None
) -> tuple[Settings, ModelHolder]:
    """Decide the model for this hardware and start loading it: on ZeroGPU right here,
    blocking, in the calling (main) thread, since ZeroGPU wants the weights on cuda at
    import and its CUDA emulation is thread-local; elsewhere in the background, so the
    page serves at once. Returns the settings with the choices made, and the holder.

    A decision that fails (a GPU was expected and CUDA is unusable) loads nothing: the
    holder fails with that message, which the page shows."""
    load_here = False
    planner = None
    if settings.backend == "transformers":
        try:
            machine = hardware.detect_machine(settings)
            decided = hardware.plan_model(settings, machine)
        except EnvaceError as err:
            loader = _raise(err)
        else:
            settings, load_here = decided.apply(settings), decided.load_at_import
            if decided.plan is not None:
                # The plan's steps and tokens where left at their defaults: public mode caps
                # the controls at the settings' values, so a thinking model keeps its room.
                settings = budget_mod.apply(settings, budget_of(decided.plan))
                if settings.concurrency == Settings().concurrency:
                    # ZeroGPU serves several visitors at once (a worker each); a GPU Space one.
                    settings = settings.replace(concurrency=decided.plan.concurrency)

            def planner(s: Settings, measured: float | None):
                from envace_demo.plan import plan as make_plan

                followed = hardware.hardware_plan(s, machine, s.model or "")
                if followed is None or measured is None:
                    return followed
                return make_plan(followed.hardware, followed.model, followed.quantization, measured_decode=measured)

    configure(settings)
    holder = ModelHolder(settings, loader=loader, measure=measure, planner=planner)
    if load_here:
        holder.load_here()
    else:
        holder.start()
    return settings, holder


def _raise(err: EnvaceError) -> Loader:
    def loader(settings: Settings) -> Any:
        raise err

    return loader
