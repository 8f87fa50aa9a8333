"""Per-visitor state, kept in ``gr.State``: nothing here is shared between visitors."""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from envace_demo.envs.manual import ManualEnvironment
from envace_demo.record import Trajectory


@dataclass
class Session:
    """One browser session: its latest records and the switch that stops its work.

    The environment of a run is created fresh per episode by the runner, so it is
    never shared either.
    """

    cancel: threading.Event = field(default_factory=threading.Event)
    trajectory: Trajectory | None = None  # the Playground's latest run
    compared: dict[str, Trajectory] = field(default_factory=dict)  # Compare: side -> record
    suite: list[dict] = field(default_factory=list)  # Compare suite rows
    folder: Path | None = None  # where this session's downloads are written
    manual: ManualEnvironment | None = None  # the Playground run's, while it waits for typed responses

    def begin(self) -> threading.Event:
        """A fresh cancel switch for a new piece of work (Stop sets the current one)."""
        self.cancel = threading.Event()
        return self.cancel

    def stop(self) -> None:
        self.cancel.set()

    def save_json(self, name: str, data: dict) -> str:
        """Write ``data`` for download; returns the file path."""
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="envace-session-"))
        path = self.folder / name
        path.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
        return str(path)

    def close(self) -> None:
        """Called when the session ends (gr.State's delete_callback): remove its files."""
        self.cancel.set()
        if self.manual is not None:
            self.manual.abort("the page was closed")
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


def new_session() -> Session:
    """A visitor's Session, made when their page loads."""
    return Session()
