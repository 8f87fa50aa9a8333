"""The lockstep scheduler, driven by scripted trajectories and a fake batcher (no model)."""

import pytest

from envace_demo.models.base import Generation
from envace_demo.scheduler import Outcome, Request, Stop, drive, lockstep, next_batch


def _request(role, k):
    return Request(prompt=f"{role} {k}", constraint=None, role=role, where="rehearsal", rindex=k)


def _trajectory(k, roles, log):
    """Waits for one generation per role in ``roles``, reporting each reply; then answers.
    On a stop it reports where it was, as the engine's steps do."""
    for role in roles:
        try:
            gen = yield _request(role, k)
        except Stop as stop:
            log.append((k, "stopped", stop.reason))
            raise
        yield f"{k} got {gen.text}"
    return Outcome(f"answer {k}", "answer")


class FakeBatcher:
    """Answers each request with its own prompt; records the batches; raises Stop on call ``stop_at``."""

    def __init__(self, stop_at=None):
        self.batches = []
        self.stop_at = stop_at

    def __call__(self, requests):
        self.batches.append([(r.rindex, r.role) for r in requests])
        if len(self.batches) == self.stop_at:
            raise Stop("cancelled")
        yield f"batch of {len(requests)}"
        return [Generation(r.prompt, 1, 1, 0.0, "stop") for r in requests]


def _ended(log):
    def on_end(k, outcome):
        log.append((k, outcome.ended))
        yield f"{k} ended"

    return on_end


def test_waiting_requests_of_one_role_go_out_as_one_batch():
    log, batcher = [], FakeBatcher()
    runs = {k: _trajectory(k, ["actor", "rehearser", "actor"], log) for k in range(3)}
    events = list(lockstep(runs, batcher, _ended(log)))
    assert batcher.batches == [
        [(0, "actor"), (1, "actor"), (2, "actor")],
        [(0, "rehearser"), (1, "rehearser"), (2, "rehearser")],
        [(0, "actor"), (1, "actor"), (2, "actor")],
    ]
    assert "1 got rehearser 1" in events  # each trajectory is sent its own reply
    assert log == [(0, "answer"), (1, "answer"), (2, "answer")]


def test_a_trajectory_that_ends_early_leaves_the_batch():
    log, batcher = [], FakeBatcher()
    runs = {0: _trajectory(0, ["actor", "actor", "actor"], log), 1: _trajectory(1, ["actor"], log),
            2: _trajectory(2, ["actor", "actor"], log)}
    events = list(lockstep(runs, batcher, _ended(log)))
    assert [[k for k, _ in b] for b in batcher.batches] == [[0, 1, 2], [0, 2], [0]]
    assert [k for k, _ in log] == [1, 2, 0]  # in the order they ended
    assert events.index("1 ended") < events.index("batch of 2")


def test_the_larger_group_of_one_role_goes_first():
    waiting = {0: _request("rehearser", 0), 1: _request("actor", 1), 2: _request("actor", 2)}
    assert next_batch(waiting) == [1, 2]
    waiting = {0: _request("rehearser", 0), 1: _request("actor", 1)}
    assert next_batch(waiting) == [0]  # a tie: the role of the lowest index


def test_a_stop_unwinds_every_trajectory_and_goes_on():
    log, batcher = [], FakeBatcher(stop_at=2)
    runs = {0: _trajectory(0, ["actor", "actor"], log), 1: _trajectory(1, ["actor"], log),
            2: _trajectory(2, ["actor", "rehearser"], log)}
    events = []
    with pytest.raises(Stop, match="cancelled"):
        for event in lockstep(runs, batcher, _ended(log)):
            events.append(event)
    # 1 had ended; 0 and 2 were waiting: each is told, then ends with the stop's reason.
    assert log == [(1, "answer"), (0, "stopped", "cancelled"), (0, "cancelled"), (2, "stopped", "cancelled"),
                   (2, "cancelled")]
    assert events[-2:] == ["0 ended", "2 ended"]
    assert all(run.gi_frame is None for run in runs.values())  # every trajectory was closed


def test_drive_runs_one_trajectory_one_request_per_call_and_unwinds_it_on_stop():
    log, batcher = [], FakeBatcher()
    run = drive(_trajectory(0, ["actor", "rehearser"], log), batcher)
    events = []
    try:
        while True:
            events.append(next(run))
    except StopIteration as done:
        assert done.value == Outcome("answer 0", "answer")
    assert batcher.batches == [[(0, "actor")], [(0, "rehearser")]]
    stopped = FakeBatcher(stop_at=1)
    with pytest.raises(Stop):
        list(drive(_trajectory(0, ["actor"], log), stopped))
    assert log == [(0, "stopped", "cancelled")]
