"""What the app allows, derived from the settings (no environment reads here)."""

from __future__ import annotations

from dataclasses import dataclass

from envace_demo.settings import Settings


@dataclass(frozen=True)
class UIOptions:
    """Caps and queue sizes. Public mode (a Space) keeps visitors from hogging the model.

    Every cap is enforced again on the server side: API callers bypass the sliders.
    """

    concurrency: int = 1  # model work running at once, shared by run, compare and suite
    queue_size: int = 16  # waiting requests before new ones are refused
    max_n: int = 16
    max_new_tokens: int = 2048
    max_steps: int = 12
    max_suite_tasks: int = 64
    allow_model_switch: bool = True
    model_wait_seconds: float = 900.0  # how long a request waits for the model to load

    @classmethod
    def from_settings(cls, settings: Settings) -> "UIOptions":
        if settings.public:
            return cls(
                concurrency=settings.concurrency,
                queue_size=settings.queue_size,
                max_n=4,
                max_new_tokens=settings.max_new_tokens,
                max_steps=settings.max_steps,
                max_suite_tasks=8,
                allow_model_switch=False,
            )
        return cls(
            concurrency=settings.concurrency,
            queue_size=settings.queue_size,
            max_new_tokens=max(2048, settings.max_new_tokens),
            max_steps=max(12, settings.max_steps),
        )
