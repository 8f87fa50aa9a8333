"""Role-wise advantages: each role is baselined by its own mean within its group."""

from __future__ import annotations

import statistics

import pytest

from envace_demo.train.advantages import assign_advantages, baselines
from envace_demo.train.rollout import Row


def row(group: int, role: str, reward: float, episode: int = 0) -> Row:
    return Row(group=group, episode=episode, role=role, prompt="", completion="x", reward=reward)


def test_actor_and_rehearser_rows_of_one_group_get_their_own_role_mean():
    # Group 0: episode 0 scored 1.0 (two actor turns, one rehearsal), episode 1 scored 0.0
    # (one actor turn, two rehearsals). Same episodes, different per-role means.
    rows = [
        row(0, "actor", 1.0, 0),
        row(0, "actor", 1.0, 0),
        row(0, "rehearser", 1.0, 0),
        row(0, "actor", 0.0, 1),
        row(0, "rehearser", 0.0, 1),
        row(0, "rehearser", 0.0, 1),
    ]
    assign_advantages(rows)
    actor_mean, rehearser_mean = 2 / 3, 1 / 3
    assert baselines(rows) == {
        (0, "actor"): pytest.approx(actor_mean),
        (0, "rehearser"): pytest.approx(rehearser_mean),
    }
    for r in rows:
        expected = r.reward - (actor_mean if r.role == "actor" else rehearser_mean)
        assert r.advantage == pytest.approx(expected)
    # A pooled baseline (mean 0.5) would give +-0.5 to everyone; the role-wise one does not.
    assert rows[0].advantage == pytest.approx(1 / 3)
    assert rows[2].advantage == pytest.approx(2 / 3)


def test_groups_do_not_share_baselines():
    rows = [row(0, "actor", 1.0), row(0, "actor", 0.0), row(1, "actor", 0.2), row(1, "actor", 0.2)]
    assign_advantages(rows)
    assert [r.advantage for r in rows] == pytest.approx([0.5, -0.5, 0.0, 0.0])


def test_advantages_sum_to_zero_within_each_group_role():
    rewards = [0.3, 0.9, -0.1, 0.5, 0.5, 1.0, 0.0]
    rows = [row(i % 2, ("actor", "rehearser")[i % 3 == 0], v) for i, v in enumerate(rewards)]
    assign_advantages(rows)
    for key in baselines(rows):
        assert sum(r.advantage for r in rows if (r.group, r.role) == key) == pytest.approx(0.0, abs=1e-12)


def test_std_scaling_is_off_by_default_and_optional():
    rewards = [1.0, 0.0, 0.0, 0.0]
    plain = [row(0, "actor", v) for v in rewards]
    scaled = [row(0, "actor", v) for v in rewards]
    assign_advantages(plain)
    assign_advantages(scaled, scale_std=True)
    assert [r.advantage for r in plain] == pytest.approx([0.75, -0.25, -0.25, -0.25])
    std = statistics.pstdev(rewards)
    assert [r.advantage for r in scaled] == pytest.approx([a.advantage / std for a in plain], rel=1e-5)


def test_equal_rewards_give_zero_advantage_even_with_scaling():
    rows = [row(0, "rehearser", 0.4) for _ in range(4)]
    assign_advantages(rows, scale_std=True)
    assert all(r.advantage == 0.0 for r in rows)
