"""The environment interface."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Sequence


class Environment(ABC):
    """A real tool backend with state. One fresh instance per episode.

    ``execute`` never raises for a bad call: a failure is a JSON response of the
    form ``{"error": {"code": "...", "message": "..."}}``.
    """

    name: ClassVar[str]
    description: ClassVar[str]

    @abstractmethod
    def tools(self) -> list:
        """The tools this environment offers (``envace_demo.schemas.Tool``)."""

    @abstractmethod
    def execute(self, name: str, arguments: dict[str, Any]) -> Any:
        """Run one call against the real state; return its JSON response."""

    @abstractmethod
    def reset(self) -> None:
        """Back to the initial state."""

    @abstractmethod
    def state(self) -> dict[str, Any]:
        """A JSON snapshot of the state, for success checks and display."""

    def writes(self, name: str) -> bool | None:
        """Whether a call of tool ``name`` changes the state (a write) or only reads it;
        None where the environment does not know (the default)."""
        return None

    def additive(self, name: str) -> bool:
        """Whether tool ``name`` only adds to the state (creates what is missing, never
        overwrites or removes): MCP's ``destructiveHint: false``. False where the
        environment does not say (the default): such a tool is never made unasked
        (``engine/repair.py``)."""
        return False

    def context_reads(self, name: str, arguments: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """The reads (tool name, arguments) that show the state a call of ``name`` with
        ``arguments`` depends on: the rehearser reads them for real before it predicts that
        call (they change nothing), so what it must know is in its context. None by default
        (an environment that does not know which of its tools read what)."""
        return []

    def quoting(self, name: str) -> tuple[str, ...]:
        """The arguments of tool ``name`` whose values quote the user's words (a catalog search):
        the actor's grammar holds them to runs of those words (``envace_demo.quoted``). None by
        default."""
        return ()

    def read_instead(self, name: str, arguments: dict[str, Any], result: Any,
                     said: Sequence[str] = ()) -> tuple[str, dict[str, Any]] | None:
        """The read (tool name, arguments) a read of ``name`` that failed with ``result`` was
        after, where the failure says the call named the wrong kind of thing (a folder read as a
        file) or a thing that is not there (the folder a missing file may be in, where ``said``,
        the user's words, may name it): the engine makes it in the actor's place
        (``EpisodeConfig.read_instead``). None by default."""
        return None

    def write_instead(self, name: str, arguments: dict[str, Any], said: Sequence[str] = ()) -> dict[str, Any] | None:
        """The arguments a write of ``name`` held on a foreseen failure was after, where it names
        what is not there and the user's words (``said``) name what is: the file a made-up path
        stands for, the folder the user named. The engine rehearses the write with them and
        makes it only where it is foreseen to go through (``engine/repair.py``). None by default."""
        return None

    def read_options(self, name: str, instead: str, result: Any) -> list[dict[str, Any]]:
        """The arguments a read of ``name`` may take, as ``result`` (of the read ``instead``, made
        for a refused read of ``name``) lists them: the files of a folder read as a file. None
        by default."""
        return []

    def stated_facts(self, call: Any, shown: list[tuple[Any, Any]]) -> str | None:
        """The facts of the state ``call``'s outcome depends on, as the reads in ``shown``
        (``(ToolCall, result)`` pairs) give them, for a rehearser trained to reason from
        them (``envace_demo.facts``); None by default (no facts named)."""
        return None

    def close(self) -> None:
        """Release what the environment holds (a server connection); nothing for in-memory ones."""

    def __enter__(self) -> "Environment":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
