"""The mode policy: what an episode of each mode runs.

- ``none``: act, execute for real, act ... final answer.
- ``parallel`` N: N imagined trajectories from the same start, advanced in lockstep,
  then one committed execution guided by their memory.
- ``sequential`` N: attempt k sees the memory of attempts 1..k-1, then commit.
- ``imagine``: N imagined trajectories and nothing real (schemas with no backend).

In a committed run of a rehearsing mode every call is rehearsed first and then
executed, so each call carries its rehearsed response and its real response.
"""

from __future__ import annotations

from dataclasses import dataclass

MODES = ("none", "parallel", "sequential", "imagine")


@dataclass(frozen=True)
class ModePolicy:
    rehearsals: int  # imagined trajectories before the commit
    sequential: bool  # each imagined trajectory sees the memory of the ones before it
    rehearse_calls: bool  # every call is rehearsed (in the commit too, before it is executed)
    commit: bool  # a committed run follows the rehearsals


def mode_policy(mode: str, n: int) -> ModePolicy:
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}")
    rehearsing = mode != "none"
    return ModePolicy(
        rehearsals=n if rehearsing else 0,
        sequential=mode == "sequential",
        rehearse_calls=rehearsing,
        commit=mode != "imagine",
    )
