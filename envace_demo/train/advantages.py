"""Role-wise group-relative advantages (method doc §4).

Group = the rollouts of one prompt x one role. A row's advantage is its reward
minus the mean reward of the rows of *its own role* in *its own group*: actor
turns are compared with actor turns, rehearsals with rehearsals. An episode with
three actor turns and two rehearsals contributes three rows to the actor mean and
two to the rehearser mean, so the two baselines differ whenever episodes differ
in length. Dividing by that group-role's std is an option, off by default as in
the paper's reference run.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from typing import Protocol


class _Scored(Protocol):
    group: int
    role: str
    reward: float
    advantage: float


def baselines(rows: Iterable[_Scored]) -> dict[tuple[int, str], float]:
    """(group, role) -> mean reward of that group's rows of that role."""
    rewards: dict[tuple[int, str], list[float]] = defaultdict(list)
    for row in rows:
        rewards[(row.group, row.role)].append(row.reward)
    return {key: statistics.fmean(values) for key, values in rewards.items()}


def assign_advantages(rows: list[_Scored], scale_std: bool = False, eps: float = 1e-6) -> None:
    """Set ``row.advantage`` on every row, in place."""
    means = baselines(rows)
    stds: dict[tuple[int, str], float] = {}
    if scale_std:
        by_key: dict[tuple[int, str], list[float]] = defaultdict(list)
        for row in rows:
            by_key[(row.group, row.role)].append(row.reward)
        stds = {key: statistics.pstdev(values) for key, values in by_key.items()}
    for row in rows:
        key = (row.group, row.role)
        advantage = row.reward - means[key]
        if scale_std:
            advantage /= stds[key] + eps
        row.advantage = advantage
