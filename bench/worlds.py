"""The rehearser on worlds it was never trained on: outcome and knowable values.

A rehearser trained in the one seeded world of each example environment can score well by
memory alone: a lookup of its closest training call does about as well. What counts is a
world with other balances, files and shelves (``envace_demo/train/worlds.py``,
``EVAL_WORLDS``: seeds no training row is drawn from), where the state a write depends on
is known only from the context the engine reads for it (``Environment.context_reads``,
last in the rehearser's few-shot).

For each rehearser adapter, greedy rehearsals of committed calls with context reads
(writes: the generated tasks' deposits, withdrawals, transfers, file writes and moves,
holds), each in the prompt the engine builds for the committed call (the run's real
results so far, then the context; the rows of ``warmstart.task_rows``, tested to be the
engine's prompts) and under the engine's grammar; then the same tasks' calls in the seeded
world. Each rehearsal is judged by ``fidelity.score``: the outcome (success, or which
error) right, and the share of the real values right among those the context made
knowable (in the arguments, the few-shot results, the tool's description) and among the
rest. Beside them, rehearsers with no model on the same calls: ``lookup`` (the real
response of the closest call of the seeded world's training data: same tool, most equal
arguments; what a rehearser that memorized the seeded world gives), ``schema-only`` and
``echo`` (``envace_demo.baselines``).

    python -m bench --only worlds [--quick]
    BENCH_WORLDS_ADAPTERS="old=/tmp/a,new=/tmp/b" python -m bench --only worlds   # compare adapters
    BENCH_WORLDS_CALLS=60 python -m bench --only worlds                            # more calls a side

An adapter folder is one ``load_backend`` takes (the actor's adapter with ``rehearser/``
inside); the first listed gives the report's ``worlds_outcome`` and ``worlds_knowable``.
"""

from __future__ import annotations

import json
import os
import random
import time
from typing import Any

ENVS = ("bank", "files", "library")
CALLS = 24  # calls per side (unseen worlds, seeded world), spread over the environments
QUICK_CALLS = 8
MAX_NEW_TOKENS = 192


def _adapters() -> list[tuple[str, str]]:
    raw = os.environ.get("BENCH_WORLDS_ADAPTERS", "demo-cpu")
    out = []
    for item in raw.split(","):
        name, _, path = item.strip().partition("=")
        out.append((name, path or name))
    return out


def pick_calls(count: int, seed: str = "bench-worlds") -> dict[str, list[tuple[Any, int]]]:
    """``{"unseen": [(scripted task, step index)], "seeded": [...]}``: ``count`` committed
    calls with context reads a side, spread over the environments; the unseen side in
    ``EVAL_WORLDS`` (one world after another), the seeded side the same tasks' calls in the
    seeded world."""
    from envace_demo.train.generate import training_tasks
    from envace_demo.train.worlds import EVAL_WORLDS

    rng = random.Random(seed)
    unseen, seeded = [], []
    seeded_tasks = {env: {t.task.name: t for t in training_tasks((env,))} for env in ENVS}
    for i in range(count):
        env, world = ENVS[i % len(ENVS)], EVAL_WORLDS[(i // len(ENVS)) % len(EVAL_WORLDS)]
        tasks = training_tasks((env,), world)
        pool = [(t, k) for t in tasks for k, step in enumerate(t.steps) if step.context]
        task, k = pool[rng.randrange(len(pool))]
        unseen.append((task, k))
        home = seeded_tasks[env][task.task.name]
        ks = [j for j, step in enumerate(home.steps) if step.context and step.call.name == task.steps[k].call.name]
        seeded.append((home, min(ks, key=lambda j: abs(j - k))))
    return {"unseen": unseen, "seeded": seeded}


def committed_row(backend, scripted, k: int):
    """The rehearser row of ``scripted``'s call ``k`` as the committed run asks it."""
    from envace_demo.train.warmstart import task_rows

    call = scripted.steps[k].call
    rows = [r for r in task_rows(backend, scripted, roles=("rehearser",), thoughts=False)
            if r.committed and r.call == call]
    return rows[0]


def _context(row, tool):
    from envace_demo.fidelity import Context

    return Context(arguments=row.call.arguments, known=tuple(r for _, r in row.few_shot),
                   description=json.dumps(tool.to_openai(), ensure_ascii=False) if tool else "")


def lookup_table(envs=ENVS) -> dict[str, list[tuple[dict, Any]]]:
    """The seeded world's training calls by tool: (arguments, real response)."""
    from envace_demo.train.generate import training_tasks

    table: dict[str, list[tuple[dict, Any]]] = {}
    for s in training_tasks(tuple(envs)):
        for step in s.steps:
            table.setdefault(step.call.name, []).append((step.call.arguments, step.result))
    return table


def lookup(table: dict, name: str, arguments: dict) -> Any:
    """The response of the closest training call: same tool, most arguments equal (the
    first of those), ``{}`` for a tool never called in training."""
    entries = table.get(name) or []
    if not entries:
        return {}
    best = max(range(len(entries)), key=lambda i: (sum(entries[i][0].get(k) == v for k, v in arguments.items()), -i))
    return entries[best][1]


def _outcome_split(scores, rows) -> dict:
    """Outcome right on the calls that really failed and on those that succeeded."""
    from envace_demo.fidelity import SUCCESS, _as_error, outcome

    fail = [s.outcome_right for s, r in zip(scores, rows) if outcome(_as_error(r.real)) != SUCCESS]
    ok = [s.outcome_right for s, r in zip(scores, rows) if outcome(_as_error(r.real)) == SUCCESS]
    share = lambda xs: round(sum(xs) / len(xs), 3) if xs else None  # noqa: E731
    return {"outcome_on_failures": share(fail), "failures": len(fail), "outcome_on_successes": share(ok)}


def foresight_split(foreseen: list[tuple[float | None, bool]], trust: float) -> dict:
    """Of the failures a rehearser foresaw, (certainty, right): how many were right among
    those it was sure of (certainty at least ``trust``: the engine trusts them) and among
    the rest (checked)."""
    sure = [right for p, right in foreseen if p is not None and p >= trust]
    unsure = [right for p, right in foreseen if p is None or p < trust]
    return {"trust_certainty": trust, "sure_failures": len(sure), "sure_failures_right": sum(sure),
            "unsure_failures": len(unsure), "unsure_failures_right": sum(unsure)}


def rehearse(backend, rows, tools_of, lead_of=None) -> tuple[list, list[dict], float, list]:
    """Greedy rehearsals of ``rows`` under the engine's grammar, each reasoning opened with
    ``lead_of(row)`` where given (the facts the engine states: ``facts.stated_facts``):
    (scores, misses, seconds, (certainty, outcome right) of each foreseen failure)."""
    from dataclasses import replace

    from envace_demo.calls import parse_execution_result
    from envace_demo.certainty import outcome_certainty
    from envace_demo.record import is_error
    from envace_demo.fidelity import score
    from envace_demo.models.base import Sampling
    from envace_demo.models.adapters import rehearser_think_chars
    from envace_demo.models.grammar import rehearsal_constraint, rehearses_failures
    from envace_demo.facts import stated_tokens

    scores, wrong, foreseen = [], [], []
    think_chars = rehearser_think_chars(backend)  # the bound the engine gives this rehearser
    start = time.perf_counter()
    for row in rows:
        tool = tools_of(row)
        constraint, lead = None, None
        if backend.supports_constraints:
            constraint = rehearsal_constraint(tool.response, row.call.name, row.call.arguments, row.few_shot,
                                              rehearses_failures(backend), think_chars)
            lead = lead_of(row) if lead_of is not None and think_chars is not None else None
            constraint = replace(constraint, think_lead=lead)
        sampling = Sampling(temperature=0.0, max_new_tokens=MAX_NEW_TOKENS + stated_tokens(lead))  # as the engine does
        gen = backend.generate(row.request, sampling, constraint)
        rehearsed, problem = parse_execution_result(gen.text)
        s = score(None if problem else rehearsed, row.real, _context(row, tool))
        scores.append(s)
        if not problem and is_error(rehearsed):
            foreseen.append((outcome_certainty(gen), s.outcome_right))
        if not s.outcome_right and len(wrong) < 8:
            wrong.append({"task": row.task, "call": row.call.to_dict(), "real": row.real,
                          "rehearsed": rehearsed if not problem else problem})
    return scores, wrong, time.perf_counter() - start, foreseen


def section(quick: bool, log, cache_dir=None) -> tuple[dict, dict]:
    from envace_demo.baselines import BASELINES
    from envace_demo.engine import EpisodeConfig
    from envace_demo.settings import default_of
    from envace_demo.fidelity import score, summarize_parts
    from envace_demo.models.loader import adapter_for, load_backend, name_after_adapter
    from envace_demo.schemas import find_tool
    from envace_demo.train.worlds import EVAL_WORLDS
    from envace_demo.facts import stated_facts

    count = int(os.environ.get("BENCH_WORLDS_CALLS", QUICK_CALLS if quick else CALLS))
    adapters = _adapters()
    backend = load_backend("embedded", device="cpu", cache_dir=cache_dir, adapter=adapters[0][1])
    picked = pick_calls(count)
    # One environment after another: a rehearsal reuses the last one's prefix (instruction, tools).
    rows = {side: [committed_row(backend, s, k) for s, k in sorted(calls, key=lambda c: ENVS.index(c[0].task.env))]
            for side, calls in picked.items()}
    tool_index = {s.task.name: s.task.tools for calls in picked.values() for s, _ in calls}

    def tools_of(row):
        return find_tool(tool_index[row.task], row.call.name)

    env_of = {s.task.name: s.task.env for calls in picked.values() for s, _ in calls}

    def lead_of(row):  # what the engine states (EpisodeConfig.state_facts, on by default)
        return stated_facts(env_of[row.task], row.call, list(row.few_shot))

    details: dict = {"calls": {side: len(r) for side, r in rows.items()}, "eval_worlds": [EVAL_WORLDS[0], EVAL_WORLDS[-1]],
                     "rehearsers": {}, "baselines": {}}
    table = lookup_table()
    for side, side_rows in rows.items():
        for name, baseline in {"lookup": lambda t, r: lookup(table, r.call.name, r.call.arguments),
                               **{n: (lambda b: lambda t, r: b(t, r.call.arguments))(b) for n, b in BASELINES.items()}}.items():
            scores = [score(baseline(tools_of(r), r), r.real, _context(r, tools_of(r))) for r in side_rows]
            details["baselines"].setdefault(name, {})[side] = {**summarize_parts(scores), **_outcome_split(scores, side_rows)}
    for i, (name, path) in enumerate(adapters):
        if i:
            backend.apply_adapter(adapter_for("embedded", path))
            name_after_adapter(backend)
        mine = details["rehearsers"].setdefault(name, {"adapter": str(adapter_for("embedded", path))})
        for side, side_rows in rows.items():
            scores, wrong, seconds, foreseen = rehearse(backend, side_rows, tools_of, lead_of)
            split = foresight_split(foreseen, default_of(EpisodeConfig, "trust_certainty"))
            mine[side] = {**summarize_parts(scores), **_outcome_split(scores, side_rows), **split,
                          "seconds": round(seconds, 1), "wrong_outcomes": wrong}
            if i == 0:  # beside it, the same rehearser writing its facts itself
                own, _, own_seconds, _ = rehearse(backend, side_rows, tools_of)
                mine[side]["own_facts"] = {**summarize_parts(own), "seconds": round(own_seconds, 1)}
                log(f"worlds: {name} {side}, its own facts: outcome {mine[side]['own_facts']['outcome']}, "
                    f"knowable {mine[side]['own_facts']['knowable']}")
            log(f"worlds: {name} {side}: outcome {mine[side]['outcome']}, knowable {mine[side]['knowable']}, "
                f"unknowable {mine[side]['unknowable']} ({len(side_rows)} calls, {seconds:.0f} s); foreseen failures "
                f"right: {split['sure_failures_right']} of {split['sure_failures']} sure (trusted), "
                f"{split['unsure_failures_right']} of {split['unsure_failures']} unsure")
    for name, by_side in details["baselines"].items():
        log(f"worlds: baseline {name}: " + "; ".join(
            f"{side} outcome {v['outcome']}, knowable {v['knowable']}" for side, v in by_side.items()))
    first = details["rehearsers"][adapters[0][0]]["unseen"]
    return {"worlds_outcome": first["outcome"], "worlds_knowable": first["knowable"]}, details
