"""One episode run from the command line: its environment, and its steps printed as they come."""

from __future__ import annotations

import json
import sys
from typing import Any

from envace_demo.engine import Episode, EpisodeConfig
from envace_demo.events import EpisodeFinished, MemoryReady, RehearsalFinished, TurnUpdated, UserTurnStarted
from envace_demo.record import Trajectory
from envace_demo.settings import Settings
from envace_demo.tasks import Task


def _environment(task: Task):
    from envace_demo.envs.registry import open_environment

    return open_environment(task.env)


def _short(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _print_step(where: str, event: TurnUpdated, out) -> None:
    """One call of the event's turn (``step 2.1``: turn 2, its first call of several), or the turn itself."""
    turn = event.turn
    several = event.call is not None and len(turn.action.calls) > 1
    prefix = f"{where} step {turn.index + 1}" + (f".{event.call + 1}" if several else "") + ":"
    if event.call is None:
        if turn.error:
            print(f"{prefix} error: {turn.error}", file=out)
        elif turn.withdrawn:
            print(f"{prefix} answer taken back ({turn.withdrawn}): {turn.action.content}", file=out)
        elif turn.superseded:
            print(f"{prefix} left out of the actor's history: {turn.superseded}", file=out)
        elif turn.set_aside:
            print(f"{prefix} answer set aside ({turn.set_aside}): {turn.action.content}", file=out)
        elif turn.reported:
            print(f"{prefix} answer (the actor's, {turn.reported!r}, left out the failure): "
                  f"{turn.action.content}", file=out)
        elif turn.added:
            print(f"{prefix} answer (the actor's left out what the tools returned of the question, or why a "
                  f"write failed; that added): {turn.action.content}", file=out)
        elif turn.completed:
            print(f"{prefix} answer (the actor's ended on a tool's text cut short; the rest added): "
                  f"{turn.action.content}", file=out)
        else:
            print(f"{prefix} answer: {turn.action.content}", file=out)
        return
    step = turn.calls[event.call]
    valid = "valid" if step.valid else "INVALID: " + "; ".join(step.validation_errors)
    taken = f"; rehearsal {turn.action_from + 1}'s action, same prompt and seed" if turn.action_from is not None else ""
    taken += f"; another path the rehearsal found: {turn.repaired}" if turn.repaired else ""
    taken += f"; made in the actor's place: {turn.instead}" if turn.instead else ""
    print(f"{prefix} call {step.call.name} {_short(step.call.arguments)} ({valid}{taken})", file=out)
    for restored in turn.action.restored if event.call == 0 else ():
        print(f"{prefix}   the user's words, as the user wrote them: {restored}", file=out)
    for read in step.context:
        print(f"{prefix}   read first: {read['call']['name']} {_short(read['call']['arguments'])} -> {_short(read['result'])}",
              file=out)
    if step.rehearsed is not None:
        print(f"{prefix}   rehearsed: {_short(step.rehearsed)}", file=out)
    if step.held:
        sure = f", certainty {step.certainty:.2f}" if step.certainty is not None else ""
        print(f"{prefix}   held: the rehearsal foresaw this failure{sure}; not executed", file=out)
    if step.self_contradicted:
        print(f"{prefix}   not held: the foreseen failure asks for an argument this call already passes", file=out)
    if turn.superseded and step.held:
        print(f"{prefix}   left out of the actor's history: {turn.superseded}", file=out)
    if step.real is not None:
        fid = "" if step.fidelity is None else f"  [fidelity {step.fidelity:.2f}]"
        label = "fetched:  " if step.fetched else "real:     "  # an imagined run's read, made for real
        print(f"{prefix}   {label} {_short(step.real)}{fid}", file=out)
    if step.error:
        print(f"{prefix}   error: {step.error}", file=out)


def _mcp_environment(settings: Settings):
    from envace_demo.envs.mcp import MCPEnvironment

    return MCPEnvironment(settings.mcp_servers, call_timeout=settings.mcp_timeout)


def _manual_environment(task: Task, shown: dict, out):
    """Reads each committed call's real response from stdin (prompts go to ``out``)."""
    from envace_demo.envs.manual import ManualEnvironment, ResponseError

    def ask(call) -> None:
        print(f"[commit] call {call.name} {_short(call.arguments)} is waiting for its real response", file=out)
        step = shown.get("step")
        if step is not None and step.rehearsed is not None:
            print(f"[commit]   rehearsed: {_short(step.rehearsed)}", file=out)
        while True:
            print("real response (JSON, one line; empty line = the rehearsed one)> ", end="", file=out, flush=True)
            line = sys.stdin.readline()
            if not line:
                env.abort("no response: end of input")
                return
            text = line.strip()
            try:
                if not text and step is not None and step.rehearsed is not None:
                    env.respond(step.rehearsed, call.id)
                else:
                    env.respond(text, call.id)
                return
            except ResponseError as err:
                print(f"error: {err}", file=out)

    env = ManualEnvironment(task.tools, on_request=ask)
    return env


def _run_task(
    backend, task: Task, config: EpisodeConfig, out=None, environment=None, shown=None, cancel=None
) -> Trajectory:
    """Run one episode; with ``out``, print it readably as it goes. ``shown`` gets
    the latest committed step (the manual environment prints its rehearsal)."""
    episode = Episode(
        backend, task, config, environment if environment is not None else _environment(task), cancel=cancel
    )
    for event in episode.run():
        if shown is not None and isinstance(event, TurnUpdated) and event.where == "commit" and event.call is not None:
            shown["step"] = event.turn.calls[event.call]
        if out is None:
            if isinstance(event, EpisodeFinished):
                return event.trajectory
            continue
        if isinstance(event, TurnUpdated) and (
            event.phase in ("executed", "held") or (event.phase == "rehearsed" and event.where == "rehearsal")
            or (event.phase == "acted" and event.call is None)
        ):
            where = f"[rehearsal {event.rehearsal + 1}]" if event.where == "rehearsal" else "[commit]"
            _print_step(where, event, out)
        elif isinstance(event, TurnUpdated) and event.phase == "rehearsed" and not episode.executor:
            _print_step("[commit]", event, out)
        elif isinstance(event, UserTurnStarted):
            print(f"--- user (turn {event.index + 1}): {event.text}", file=out)
        elif isinstance(event, RehearsalFinished):
            print(f"[rehearsal {event.rehearsal.index + 1}] ended: {event.rehearsal.ended}", file=out)
        elif isinstance(event, MemoryReady) and event.memory.get("withdrawn"):
            print(f"[commit] rehearsal memory withdrawn: {event.memory['withdrawn']['why']}", file=out)
        elif isinstance(event, MemoryReady):
            print("--- rehearsal memory ---\n" + event.memory["text"] + "\n---", file=out)
        elif isinstance(event, EpisodeFinished):
            t = event.trajectory
            print(f"final answer: {t.final_answer}", file=out)
            print(
                f"ended: {t.ended}; success: {t.success}"
                + (f" ({'; '.join(t.check_reasons)})" if t.check_reasons else "")
                + f"; mean fidelity: {t.fidelity}; totals: {json.dumps(t.totals())}",
                file=out,
            )
            return t
    raise AssertionError("unreachable")

