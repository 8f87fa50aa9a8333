"""The app under test: ``LaunchedApp`` runs ``python app.py`` in a subprocess (the launcher
``bench.app_process`` that the load benchmark uses too); ``serve`` runs it in this process
with a given backend."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from bench.app_process import AppProcess, free_port

__all__ = ["LaunchedApp", "free_port", "serve"]


class LaunchedApp(AppProcess):
    """``python app.py`` in a subprocess with the cheap configuration; constructed once the
    page serves (``served_after``); ``wait_model_ready()`` for the model."""

    def __init__(self, log_path: Path, extra_env: dict[str, str] | None = None):
        super().__init__(log_path, extra_env)
        self.wait_served(timeout=240)


def built_app(settings, backend):
    """The real app built in this process, ``backend`` as its model (loaded): (demo, its
    handlers by function name), for tests that call the handlers directly."""
    from envace_demo.ui import build_app
    from envace_demo.ui.holder import ModelHolder

    holder = ModelHolder(settings, loader=lambda s: backend)
    holder.start()
    holder.wait(timeout=60)
    demo = build_app(settings, holder=holder)
    return demo, {f.fn.__name__: f for f in demo.fns.values() if hasattr(f.fn, "__name__")}


@contextmanager
def serve(settings, backend, **launch):
    """The real app in this process on a loopback port, ``backend`` as its model; yields its URL.
    ``launch``: more ``demo.launch`` options (``mcp_server=True``)."""
    from envace_demo.ui import build_app
    from envace_demo.ui.holder import ModelHolder

    holder = ModelHolder(settings, loader=lambda s: backend)
    holder.start()
    holder.wait(timeout=30)
    demo = build_app(settings, holder=holder)
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, **launch)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        demo.close()
