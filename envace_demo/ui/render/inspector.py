"""The prompt inspector: the exact rendered prompts of any step of a record."""

from __future__ import annotations

from envace_demo.record import CallStep, Trajectory, Turn, rows


def inspector_choices(traj: Trajectory | None) -> list[tuple[str, str]]:
    """(label, key) for every step that has prompts: committed first, then imagined."""
    if traj is None:
        return []
    out = [
        (f"committed step {i + 1}: {_step_label(turn, call)}", f"c:{i}")
        for i, (turn, call) in enumerate(rows(traj.turns))
        if turn.actor_prompt
    ]
    for r in traj.rehearsals:
        out += [
            (f"rehearsal {r.index + 1}, step {i + 1}: {_step_label(turn, call)}", f"r:{r.index}:{i}")
            for i, (turn, call) in enumerate(rows(r.turns))
            if turn.actor_prompt
        ]
    return out


def _step_label(turn: Turn, call: CallStep | None) -> str:
    return call.call.name if call else ("error" if turn.error else "answer")


def inspector_prompts(traj: Trajectory | None, key: str | None) -> tuple[str, str]:
    """The rendered actor and rehearser prompts of the step ``key`` names."""
    if traj is None or not key:
        return "", ""
    kind, *idx = key.split(":")
    try:
        turns = traj.turns if kind == "c" else traj.rehearsals[int(idx[0])].turns
        turn, call = list(rows(turns))[int(idx[-1])]
    except (IndexError, ValueError):
        return "", ""
    rehearser = (call.rehearser_prompt if call else None) or (
        "(no rehearser prompt: this step was not rehearsed)"
        if call
        else "(no call, nothing to rehearse)"
    )
    return turn.actor_prompt or "", rehearser
