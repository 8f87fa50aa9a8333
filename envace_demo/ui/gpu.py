"""``@gpu(seconds)``: ZeroGPU's ``spaces.GPU`` on a Space, a no-op everywhere else."""

from __future__ import annotations

from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

try:  # the `spaces` package exists on Hugging Face Spaces only
    import spaces as _spaces
except ImportError:
    _spaces = None


def gpu(seconds: int | Callable[..., int]) -> Callable[[F], F]:
    """Request a GPU for at most ``seconds`` per call; a callable gets the call's arguments.

    ``spaces.GPU`` is itself a no-op on a Space without ZeroGPU.
    """
    if _spaces is None:
        return lambda fn: fn
    return _spaces.GPU(duration=seconds)
