"""A read refused as the wrong kind of thing is made as the read it was after
(``EpisodeConfig.read_instead``).

Asked who attended a meeting, the small actor listed the notes file as a folder and answered
the tool's error; asked what is on a todo list "somewhere in /notes", it read the folder as a
file. The path was right, the read was not, and the environment knows which read fits
(``Environment.read_instead``): a file is read, a folder listed. So the engine makes that read
in the actor's place, and the refused one leaves the actor's history (``Turn.superseded``; it
stays in the record and in the real errors). Where the read made instead lists what the refused
read could have meant (the files of the folder), the actor then picks the one it was after: its
own tool, its grammar narrowed to the paths listed (``Environment.read_options``; to those the
user's words name, where they name some: "my todo list" names ``todo.txt``), drawn greedily.
A file that is not there ("/system/home/user1/config.txt", a path the actor made up) is
looked for the same way: the folder the user's words name, or the deepest folder of its path
that exists, is listed, and the actor picks among its files. Only reads: nothing that changes
state is made for the actor."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Generator

from envace_demo.calls import format_call
from envace_demo.events import TurnUpdated
from envace_demo.models.base import Constraint, Generation
from envace_demo.prompts import Conversation, actor_prompt
from envace_demo.record import CallStep, ToolCall, Turn, error_code, is_error
from envace_demo.scheduler import Request
from envace_demo.schemas import Tool, find_tool


class Instead(str):
    """What a step made in the actor's place is (``Turn.instead``), told apart from a repair's plan."""


def made_call(call: ToolCall) -> Generation:
    """A call the engine makes for the actor, written as the actor writes one (no reasoning)."""
    return Generation(f"<think>\n</think>\n\n{format_call(call)}", 0, 0, 0.0)


@dataclass
class Refusal:
    """A committed read refused as the wrong kind, and the reads that follow it."""

    turn: Turn  # the refused read's turn, last in the history when it was refused
    conversation: Conversation  # live
    instead: ToolCall  # the read the environment names
    tool: Tool  # the refused read's tool: the actor's choice is a call of it
    stage: int = 0  # 0: the read instead is next; 1: the actor's choice is next; 2: done

    def choice_left(self) -> bool:
        return self.stage == 1

    def next_step(self, runner: Any) -> Generator[Request | TurnUpdated, Generation, tuple[Generation, str] | None]:
        """The engine's next action and what it is, or None: the actor acts as it would."""
        stage, self.stage = self.stage, self.stage + 1
        if stage == 0:
            turns = self.conversation.turns
            if len(self.turn.calls) != 1 or not turns or turns[-1] is not self.turn:
                return None
            turns.remove(self.turn)
            refused = self.turn.calls[0]
            elsewhere = self.instead.arguments != refused.call.arguments  # not there: where it may be
            self.turn.superseded = (f"{refused.call.name} refused the path ({error_code(refused.real)}): "
                                    f"{self.instead.name} {'looks where it may be' if elsewhere else 'reads it instead'}")
            yield TurnUpdated("commit", None, self.turn, None, "acted")
            return made_call(self.instead), Instead(
                f"{self.instead.name} of {self.instead.arguments.get('path', 'the folder')}, where the file "
                f"{refused.call.name} did not find may be" if elsewhere
                else f"{self.instead.name} of the path {refused.call.name} refused")
        # Only a grammar keeps the choice to the paths listed: unconstrained, the actor acts as it would.
        if stage == 1 and runner.constrained and (narrowed := self._narrowed(runner)) is not None:
            prompt = actor_prompt(runner.backend, self.conversation, runner.tools)
            constraint = Constraint(role="actor", think_chars=0, tools=(narrowed,), require_call=True)
            gen = yield Request(prompt, constraint, "actor", "repair", None, temperature=0.0)
            return gen, Instead(f"the {self.tool.name} the refused read was after, among what {self.instead.name} found")
        return None

    def _narrowed(self, runner: Any) -> Tool | None:
        """The refused read's tool, its arguments narrowed to what the read instead found."""
        turns = self.conversation.turns
        last: CallStep | None = turns[-1].calls[-1] if turns and turns[-1].calls else None
        if last is None or last.call != self.instead or last.real is None or is_error(last.real):
            return None
        environment = runner.committer.environment
        options = environment.read_options(self.tool.original_name, self.instead.name, last.real)
        return narrowed(self.tool, named(options, self.conversation.requests()))


def refused_read(runner: Any, turn: Turn, step: CallStep, conversation: Conversation) -> Refusal | None:
    """The refusal of ``step``, a committed read that failed for real, where the environment
    names the read it was after and the actor has that tool."""
    environment = runner.committer.environment
    tool = find_tool(runner.tools, step.call.name)
    if environment is None or tool is None or not is_error(step.real) or runner.writes(step.call.name) is not False:
        return None
    instead = environment.read_instead(tool.original_name, step.call.arguments, step.real, conversation.requests())
    other = find_tool(runner.tools, instead[0]) if instead is not None else None
    if other is None or runner.writes(other.name) is not False:
        return None
    return Refusal(turn, conversation, ToolCall(other.name, instead[1]), tool)


def named(options: list[dict[str, Any]], requests: list[str]) -> list[dict[str, Any]]:
    """The options the user's words name (a word of three letters or more of a value's last
    part: "todo list" names ``/notes/todo.txt``), where some but not all are named; else all."""
    said = {w for r in requests for w in re.findall(r"[a-z]{3,}", r.lower())}

    def names(option: dict[str, Any]) -> bool:
        last = [str(v).rstrip("/").rsplit("/", 1)[-1].lower() for v in option.values()]
        return any(w in said for part in last for w in re.findall(r"[a-z]{3,}", part))

    chosen = [o for o in options if names(o)]
    return chosen if 0 < len(chosen) < len(options) else options


def narrowed(tool: Tool, options: list[dict[str, Any]]) -> Tool | None:
    """``tool`` whose one argument may only take the values in ``options`` (argument dicts of
    one and the same key), or None where there are none."""
    keys = {tuple(o) for o in options}
    if not options or len(keys) != 1 or len(next(iter(keys))) != 1:
        return None
    (key,) = next(iter(keys))
    values = list(dict.fromkeys(o[key] for o in options))
    prop = {**tool.parameters.get("properties", {}).get(key, {}), "enum": values}
    parameters = {"type": "object", "properties": {key: prop}, "required": [key], "additionalProperties": False}
    return replace(tool, parameters=parameters)
