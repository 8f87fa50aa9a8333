"""ZeroGPU: the two sizes of GPU call, what one call may schedule and what it costs a
visitor's quota, and how many visitors run at once."""

from __future__ import annotations

from dataclasses import replace

from envace_demo.errors import ConfigError
from envace_demo.plan.hardware import Hardware

# ZeroGPU: the most one GPU call may schedule after spaces' duration factor (an anonymous
# visitor has about 2 minutes a day), and the part of a call that is not the episode
# (moving the weights in, starting generation, the last events out).
ZERO_MAX_SCHEDULED = 60
ZERO_MARGIN_SECONDS = 8

# ZeroGPU runs each GPU call in its own worker on its own slice of a card: several
# visitors at once (the app's queue lets this many run; spaces queues the rest).
ZERO_CONCURRENCY = 3

# The sizes spaces.GPU(size=...) takes (spaces.zero.client.get_duration_seconds and
# schedule): "large", half a card, scheduled as the duration times the card's duration
# factor; "xlarge", the whole card, scheduled as asked and checked against the visitor's
# quota twice over ("requested *= 2 if gpu_size == 'xlarge'").
ZERO_SIZES = ("large", "xlarge")
XLARGE_QUOTA_FACTOR = 2


def call_size(size: str) -> str:
    """A size setting as spaces takes it: "auto" where no plan chose one is half a card."""
    return ZERO_SIZES[0] if size == "auto" else size


def default_concurrency(hw: Hardware) -> int:
    # On a dedicated GPU the app holds one model (on l4x4 split over the 4 cards by
    # device_map): two runs at once would share it and each take twice as long.
    return ZERO_CONCURRENCY if hw.zero_gpu else 1


def call_hardware(hw: Hardware, size: str = "large") -> Hardware:
    """What one GPU call of ``size`` gets: the flavor's slice ("large"), or the whole card
    ("xlarge": twice the slice's memory, bandwidth and throughput, no duration factor)."""
    check_size(size)
    if size == "large" or not hw.zero_gpu:
        return hw
    return replace(
        hw, gpu=(hw.gpu or "").removesuffix(" (half)"), memory_gib=hw.memory_gib * 2, bandwidth_gbs=hw.bandwidth_gbs * 2, tflops=hw.tflops * 2, duration_factor=1.0
    )


def size_factor(hw: Hardware, size: str = "large") -> float:
    """What spaces multiplies a request of ``size`` by before scheduling it."""
    return call_hardware(hw, size).duration_factor


def scheduled_seconds(hw: Hardware, duration: int, size: str = "large") -> int:
    """What spaces schedules for a ``duration`` request (spaces.zero.client.get_duration_seconds:
    times the duration factor on a "large" slice, then rounded)."""
    return round(duration * size_factor(hw, size))


def quota_seconds(hw: Hardware, duration: int, size: str = "large") -> int:
    """What a ``duration`` request is checked for against the visitor's quota."""
    scheduled = scheduled_seconds(hw, duration, size)
    return scheduled * XLARGE_QUOTA_FACTOR if size == "xlarge" else scheduled


def check_size(size: str) -> None:
    if size not in ZERO_SIZES:
        raise ConfigError(f"gpu size {size!r}: expected one of {', '.join(ZERO_SIZES)}")
