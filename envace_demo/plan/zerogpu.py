"""ZeroGPU: what one GPU call may schedule, and how many visitors run at once."""

from __future__ import annotations

from envace_demo.plan.hardware import Hardware

# ZeroGPU: the most one GPU call may schedule after spaces' duration factor (an anonymous
# visitor has about 2 minutes a day), and the part of a call that is not the episode
# (moving the weights in, starting generation, the last events out).
ZERO_MAX_SCHEDULED = 60
ZERO_MARGIN_SECONDS = 8

# ZeroGPU runs each GPU call in its own worker on its own slice of a card: several
# visitors at once (the app's queue lets this many run; spaces queues the rest).
ZERO_CONCURRENCY = 3


def default_concurrency(hw: Hardware) -> int:
    # On a dedicated GPU the app holds one model (on l4x4 split over the 4 cards by
    # device_map): two runs at once would share it and each take twice as long.
    return ZERO_CONCURRENCY if hw.zero_gpu else 1


def scheduled_seconds(hw: Hardware, duration: int) -> int:
    """What spaces schedules for a ``duration`` request (spaces.zero.client.get_duration_seconds:
    times the duration factor on a "large" slice, then rounded)."""
    return round(duration * hw.duration_factor)
