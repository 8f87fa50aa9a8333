"""Warm-start rows from real transitions: the two roles' prompts exactly as the engine
builds them, with what a correct policy writes as the target.

Rehearser rows: for each call of a scripted task (``generate/``), run against the real
environment, the prompt ``rehearser_messages`` builds (the real few-shot and history
the engine would show at that point) and the target
``<think>\\n…\\n</think>\\n\\n<execution_result>\\n{real JSON}\\n</execution_result>`` (or with the
empty reasoning block the grammar writes when reasoning is off).
A call gets two rows: as in a rehearsal (no real result known yet) and as in the
committed run of a rehearsing mode (the earlier calls' real results as few-shot), one
where the two prompts are the same (a first call). In the committed row, a call whose
environment names reads for it (``Environment.context_reads``: a write's accounts,
directory or book) has those reads' real results, made in the script's world just
before the call, last in its few-shot (``context.shots``), as the engine reads and
places them before it rehearses a committed call: the rehearser learns to read the
state it is shown. (An imagined call of a rehearsal gets no reads, in the engine as here.)
The memory's imagined run made its reads before its first write for real, as the engine's
(``EpisodeConfig.imagined_reads``).

Actor rows: each turn of the scripted trajectory (one call a turn, then the answer) in
the actor's prompt (``actor_prompt``: the Qwen3 template with tools), without and, where
``with_memory``, with the rehearsal memory of a rehearsal that went as the real run did
(the committed actor's prompt in parallel mode).

Every prompt is rendered by the backend that will be trained (``backend.prompt``), so
the rows are the demo's prompts byte for byte.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from envace_demo import memory as memory_mod
from envace_demo.calls import format_call, parse_action
from envace_demo.context import shots
from envace_demo.prompts import (
    Conversation,
    actor_prompt,
    rehearser_messages,
    rehearser_prompt,
    shows_response_schema,
)
from envace_demo.record import CallStep, Rehearsal, ToolCall, Turn
from envace_demo.schemas import find_tool
from envace_demo.facts import OUTCOME_SAID, deciding_facts
from envace_demo.train.generate import ScriptedTask

REHEARSER_THOUGHT = "The call is well formed, {name} is a candidate tool and its arguments fit the schema."


@dataclass
class SftRow:
    role: str  # "actor" or "rehearser"
    task: str
    prompt: str  # the rendered prompt
    completion: str  # the target, without the end-of-turn token
    request: Any = None  # the backend's Prompt (to generate from it)
    # A rehearser row's call, its real response and the few-shot pairs its prompt shows
    # (what made values knowable: ``bench/worlds.py``).
    call: ToolCall | None = None
    real: Any = None
    few_shot: list[tuple[ToolCall, Any]] | None = None
    committed: bool = False  # a rehearser row as in the committed run (real results, context)


def think(thought: str | None) -> str:
    """The reasoning block; ``None``: the empty one the grammar writes when reasoning is
    off (the CPU default on a slow machine), so the model learns to act without it."""
    return EMPTY_THOUGHT if thought is None else f"<think>\n{thought}\n</think>\n\n"


EMPTY_THOUGHT = "<think>\n</think>\n\n"


def rehearser_target(call: ToolCall, result: Any, thoughts: bool = True, facts: str | None = None) -> str:
    """The rehearser's target: its reasoning (``facts`` where given: ``facts.py``), then
    the real result."""
    body = json.dumps(result, ensure_ascii=False)
    thought = facts or (REHEARSER_THOUGHT.format(name=call.name) if thoughts else None)
    return f"{think(thought)}<execution_result>\n{body}\n</execution_result>"


RESULT_OPEN = "<execution_result>\n"


def decision_span(completion: str) -> tuple[int, int] | None:
    """Where a rehearser target decides its outcome: from the response's start through
    the error code (``{"error": {"code": "X"``) or through the first key of a success.
    These few characters say success or which refusal; the values after them follow
    from that choice and the context. A target that reasons from the deciding facts
    (``facts.py``) decides earlier, at its thought's outcome word, and the response
    follows it. ``None`` for a completion with no result."""
    said = completion.find(OUTCOME_SAID, 0, max(completion.find(RESULT_OPEN), 0))
    if said >= 0:
        start = said + len(OUTCOME_SAID)
        return start, completion.index(".", start)
    start = completion.find(RESULT_OPEN)
    if start < 0:
        return None
    start += len(RESULT_OPEN)
    body = completion[start:]
    if body.startswith('{"error"'):
        code = body.find('"code": "')
        end = body.find('"', code + len('"code": "')) + 1 if code >= 0 else -1
    else:
        end = body.find('"', body.find('"') + 1) + 1 if body.startswith('{"') else -1
    return (start, start + end) if end > 0 else None


def _memory_text(summary: dict) -> str | None:
    """The rehearsal memory as the engine shows it to the committed actor by default
    (``EpisodeConfig.memory``: the predicted outcomes alone, or the values too)."""
    from envace_demo.engine import EpisodeConfig

    if EpisodeConfig.memory == "full":
        return summary.get("text") or None
    return memory_mod.render(summary.get("attempts", []), values=False) or None


def _turns(scripted: ScriptedTask, tool_names: set[str], thoughts: bool = True) -> list[Turn]:
    """The scripted trajectory as the record holds it: one call a turn, each with its real
    response (also as the rehearsed one: a rehearsal that was right), then the answer."""
    turns = []
    for i, step in enumerate(scripted.steps):
        text = think(step.thought if thoughts else None) + format_call(step.call)
        action = parse_action(text, tool_names)
        assert not action.error and len(action.calls) == 1, action.error_message
        step_record = CallStep(action.calls[0], valid=True, rehearsed=step.result, real=step.result)
        turns.append(Turn(i, action, [step_record]))
    text = think(scripted.answer_thought if thoughts else None) + scripted.answer
    turns.append(Turn(len(turns), parse_action(text, tool_names)))
    return turns


def task_rows(
    backend,
    scripted: ScriptedTask,
    *,
    with_memory: bool = True,
    response_schema: bool | None = None,
    thoughts: bool = True,
    roles: tuple[str, ...] = ("actor", "rehearser"),
    memory_from: ScriptedTask | None = None,
    context: bool = True,
    rehearse: str = "all",
    facts: bool = False,
) -> list[SftRow]:
    """The ``roles``' rows of one scripted task; ``thoughts``: targets reason in a sentence
    (else the empty reasoning block). ``memory_from``: the same task in another world, whose
    trajectory is the rehearsal memory shown (a rehearsal that got the values wrong: the
    target still follows the real results in front of the actor). ``context``: a committed
    call's context reads last in its few-shot. ``rehearse``: ``"all"``, ``"context"`` (the
    committed rows of calls with context reads: a write's outcome is in its context) or
    ``"brief"`` (their ``brief_row``s). ``facts``: targets reason from the facts shown."""
    if scripted.rehearser_only:
        roles = tuple(r for r in roles if r != "actor")
    task = scripted.task
    tools = task.tools
    turns = _turns(scripted, {t.name for t in tools}, thoughts)
    show_schema = shows_response_schema(backend.info.model_id, response_schema)
    rows: list[SftRow] = []
    mistakes = [k for k, step in enumerate(scripted.steps) if step.mistake]
    # (memory, the committed turns): the run as scripted, its mistaken calls in the
    # conversation but never a target; then, with a memory, the run the memory changes.
    runs: list[tuple[str | None, list[Turn]]] = [(None, turns)]
    if with_memory and mistakes:
        # The imagined run foresaw the first mistake's failure and ended there (as the
        # engine's imagined runs end at their first write): the committed actor takes the
        # path that works from the start.
        foreseen = Rehearsal(index=0, turns=_fetched(turns[: mistakes[0] + 1], scripted), ended="first_write")
        kept = [replace(t, index=i) for i, t in enumerate(t for k, t in enumerate(turns) if k not in mistakes)]
        runs.append((_memory_text(memory_mod.summarize([foreseen])), kept))
    elif with_memory:
        source = memory_from or scripted
        shown = turns if memory_from is None else _turns(memory_from, {t.name for t in tools}, thoughts)
        rehearsal = Rehearsal(index=0, turns=_fetched(shown, scripted), final_answer=source.answer, ended="answer")
        runs.append((_memory_text(memory_mod.summarize([rehearsal])), turns))
    for memory, run in runs if "actor" in roles else []:
        for k, turn in enumerate(run):
            if run is turns and k in mistakes:
                continue
            conversation = Conversation(task.prompt, run[:k], memory=memory, executed=True)
            prompt = actor_prompt(backend, conversation, tools)
            rows.append(SftRow("actor", task.name, prompt.shown(), turn.action.text, prompt))
    wrote = _writes_before(scripted)
    for k, turn in enumerate(turns[:-1] if "rehearser" in roles else []):
        step = turn.calls[0]
        reads = list(scripted.steps[k].context) if context else []
        if rehearse == "brief":  # the deciding step alone: only where facts decide it
            brief = brief_row(backend, scripted, turn, reads, show_schema) if facts else None
            rows += [brief] if brief else []
            continue
        earlier = [(t.calls[0].call, t.calls[0].real) for t in turns[:k]]
        # (earlier real results, context, executed): as in a rehearsal (which reads the real
        # state until it imagines its first write), then as committed.
        imagined = [] if wrote[k] else reads
        phases = [([], imagined, False)] if (earlier or imagined != reads) else []
        phases.append((earlier, reads, True))
        if rehearse == "context":
            phases = phases[-1:] if scripted.steps[k].context else []
        for known, shown, executed in phases:
            conversation = Conversation(task.prompt, turns[:k], executed=executed)
            few = shots([], known, shown)
            messages = rehearser_messages(
                tools, few, conversation, turn.action.text, step.call,
                find_tool(tools, step.call.name), response_schema=show_schema,
            )
            prompt = rehearser_prompt(backend, messages)
            reasons = deciding_facts(task.env, step.call, few, step.real) if facts else None
            rows.append(
                SftRow("rehearser", task.name, prompt.shown(), rehearser_target(step.call, step.real, thoughts, reasons),
                       prompt, step.call, step.real, few, executed)
            )
    return rows


def brief_row(backend, scripted: ScriptedTask, turn: Turn, reads: list, show_schema: bool) -> SftRow | None:
    """A short rehearser row for one call with context reads: the whitelist holds its tool
    alone, the few-shot its context reads alone, the history the request alone; the
    target reasons from the deciding facts (``facts.py``) as the full row's does.

    In a full row those facts sit among some two thousand prompt tokens, and a 135M
    rehearser trained on a few hundred such rows learnt to copy them and not the step
    from them to the outcome (bench/RESULTS.md, runs 12-13). A brief row costs a
    fraction of a full one, so the step can be drilled over many more worlds. ``None``
    where the reads decide nothing the facts name."""
    step = turn.calls[0]
    tool = find_tool(scripted.task.tools, step.call.name)
    reasons = deciding_facts(scripted.task.env, step.call, reads, step.real)
    if tool is None or reasons is None:
        return None
    conversation = Conversation(scripted.task.prompt, [], executed=True)
    messages = rehearser_messages([tool], reads, conversation, turn.action.text, step.call, tool,
                                  response_schema=show_schema)
    prompt = rehearser_prompt(backend, messages)
    return SftRow("rehearser", scripted.task.name, prompt.shown(), rehearser_target(step.call, step.real, True, reasons),
                  prompt, step.call, step.real, list(reads), True)


def _fetched(turns: list[Turn], scripted: ScriptedTask) -> list[Turn]:
    """``turns`` as an imagined run records them: its reads before its first write made for
    real, not rehearsed (``EpisodeConfig.imagined_reads``), so the memory says "real"."""
    from envace_demo.envs.registry import create

    env = create(scripted.task.env) if scripted.task.env else None
    out, wrote = [], env is None
    for turn in turns:
        calls = []
        for step in turn.calls:
            read = not wrote and env.writes(step.call.name) is False
            calls.append(replace(step, rehearsed=None, fetched=True) if read else step)
            wrote = wrote or not read
        out.append(replace(turn, calls=calls))
    return out


def _writes_before(scripted: ScriptedTask) -> list[bool]:
    """For each step, whether a step before it wrote (its environment says which tools write;
    one that does not say counts as writing, as in the engine)."""
    from envace_demo.envs.registry import create

    env = create(scripted.task.env) if scripted.task.env else None
    out, wrote = [], False
    for step in scripted.steps:
        out.append(wrote)
        wrote = wrote or env is None or env.writes(step.call.name) is not False
    return out


def warm_rows(
    backend, scripted: list[ScriptedTask], memory_every: int = 1, memory_from: list[ScriptedTask] | None = None,
    actor_recovery: bool = True, **kwargs,
) -> list[SftRow]:
    """The rows of every task; the actor's rows with a rehearsal memory for every
    ``memory_every``-th task (0: none) and for every task with a mistaken call (its memory
    foresaw the failure: the rows rehearsal is for), taken from ``memory_from`` (the same
    tasks in another world) where given. ``actor_recovery`` False: a task with a mistaken
    call gives no actor rows (its rehearser rows stay)."""
    others = {s.task.name: s for s in memory_from or ()}
    roles = kwargs.pop("roles", ("actor", "rehearser"))
    rows = []
    for i, s in enumerate(scripted):
        mistaken = any(st.mistake for st in s.steps)
        mine = roles if actor_recovery or not mistaken else tuple(r for r in roles if r != "actor")
        rows += task_rows(backend, s, roles=mine, memory_from=others.get(s.task.name), **kwargs,
                          with_memory=bool(memory_every) and (i % memory_every == 0 or mistaken))
    return rows
