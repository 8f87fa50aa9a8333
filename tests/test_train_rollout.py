"""Rollout rows take the token ids each generation reported, one generation per row,
even when two rollouts wrote the same text."""

from __future__ import annotations

import itertools
from dataclasses import replace

from conftest import ScriptedBackend, call_text
from envace_demo.tasks import find_task
from envace_demo.train.config import TrainConfig
from envace_demo.train.rollout import rollout_group
from helpers import ANSWER, PREDICTED


class NumberedIds(ScriptedBackend):
    """Scripted text; each generation reports its own token ids (a counter) and prompt ids."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.counter = itertools.count(100)

    def generate(self, prompt, sampling, constraint=None, on_token=None, cancel=None):
        gen = super().generate(prompt, sampling, constraint, on_token, cancel)
        return replace(gen, prompt_ids=[1, 2, 3], token_ids=[next(self.counter), 0])


def test_identical_samples_keep_their_own_token_ids():
    task = find_task("bank", "check-balance")
    call = call_text("get_account", {"account_id": "ACC-1003"})
    backend = NumberedIds(actor=[call, call, ANSWER, ANSWER], rehearser=[PREDICTED, PREDICTED])
    config = TrainConfig(group_size=2, max_turns=2, max_new_tokens=40, constrained=False, require_first_call=False)
    group = rollout_group(backend, task, 0, config, seed=0, tokenize=lambda text: [9] * len(text), stop_id=0)
    first_turns = [row for row in group.rows if row.role == "actor" and row.completion == call]
    assert len(first_turns) == 2
    # The two rollouts wrote the same call with the same prompt: each row still gets its own sample.
    assert sorted(tuple(row.completion_ids) for row in first_turns) == [(100, 0), (101, 0)]
    assert all(row.prompt_ids == [1, 2, 3] for row in group.rows)  # as reported, not re-tokenized
    used = [tuple(row.completion_ids) for row in group.rows]
    assert len(used) == len(set(used))  # no generation is trained twice
