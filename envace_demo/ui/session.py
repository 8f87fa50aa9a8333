"""Per-visitor state, kept in ``gr.State``: nothing here is shared between visitors."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from envace_demo.envs.manual import ManualEnvironment
from envace_demo.errors import StorageError
from envace_demo.record import Trajectory

if TYPE_CHECKING:
    from envace_demo.envs.base import Environment
    from envace_demo.ui.inputs import RunRequest


@dataclass
class Conversation:
    """The Playground's conversation: the request it began with (a follow-up runs under its
    mode and settings), its live environment (kept from one user message to the next, the
    state the last one left; nobody else's session holds it) and its record so far."""

    request: "RunRequest"
    environment: "Environment | None" = None
    trajectory: Trajectory | None = None

    def close(self) -> None:
        if self.environment is not None:
            self.environment.close()
            self.environment = None


@dataclass
class Session:
    """One browser session: its latest records and the switch that stops its work.

    A Run's environment is fresh: the runner opens one per episode, or, for a built-in one,
    the Playground opens it for the run's conversation, kept here for its follow-ups; so it
    is never shared either.
    """

    cancel: threading.Event = field(default_factory=threading.Event)
    trajectory: Trajectory | None = None  # the Playground's latest run
    compared: dict[str, Trajectory] = field(default_factory=dict)  # Compare: side -> record
    suite: list[dict] = field(default_factory=list)  # Compare suite rows
    folder: Path | None = None  # where this session's downloads are written
    manual: ManualEnvironment | None = None  # the Playground run's, while it waits for typed responses
    conversation: Conversation | None = None  # the Playground's, while it may take a follow-up
    # Environment -> real (call, result) pairs of this visitor's earlier runs: the rehearser's
    # few-shot in its later runs there (never another visitor's).
    known: dict[str, list] = field(default_factory=dict)

    def remember(self, trajectory: Trajectory) -> None:
        """Keep the reads of a finished run on a bundled environment (``engine.known_reads``)."""
        from envace_demo.engine import known_reads

        if trajectory.environment:
            kept = self.known.setdefault(trajectory.environment, [])
            for pair in known_reads(trajectory):
                if all(call != pair[0] for call, _ in kept):
                    kept.append(pair)
            del kept[:-8]  # the latest eight: a rehearser prompt stays short

    def converse(self, conversation: Conversation | None) -> Conversation | None:
        """``conversation`` becomes the Playground's (None: no conversation goes on); the one
        before it ends, its environment closed."""
        if self.conversation is not None and self.conversation is not conversation:
            self.conversation.close()
        self.conversation = conversation
        return conversation

    def begin(self) -> threading.Event:
        """A fresh cancel switch for a new piece of work (Stop sets the current one)."""
        self.cancel = threading.Event()
        return self.cancel

    def stop(self) -> None:
        self.cancel.set()

    def save_json(self, name: str, data: dict) -> str:
        """Write ``data`` for download, whole or not at all (a temporary file renamed into
        place); returns the file path. StorageError (the file and the cause) when it cannot."""
        text = json.dumps(data, indent=2, ensure_ascii=False)
        try:
            if self.folder is None:
                self.folder = Path(tempfile.mkdtemp(prefix="envace-session-"))
            path = self.folder / name
            write_atomic(path, text)
        except OSError as err:
            raise StorageError("download", name, err) from None
        return str(path)

    def close(self) -> None:
        """Called when the session ends (gr.State's delete_callback): remove its files."""
        self.cancel.set()
        if self.manual is not None:
            self.manual.abort("the page was closed")
        self.converse(None)
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


def write_atomic(path: Path, text: str) -> None:
    """``text`` at ``path``, whole or not at all: a full disk leaves the old file (or none)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def new_session() -> Session:
    """A visitor's Session, made when their page loads."""
    return Session()
