"""The Gradio app. The only package that imports gradio; ``app.py`` builds and launches it.

``build_app`` and ``launch_options`` load gradio on first use, so the pure modules here
(render, charts, inputs, runner, holder, session) import without it.
"""

from typing import Any

__all__ = ["build_app", "launch_options"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from envace_demo.ui import app

        return getattr(app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
