"""The supervised call shared by generation and tool execution."""

import threading
import time

import pytest

from envace_demo.supervise import supervise, wait


def _forever(stop):
    def work():
        while not stop.is_set():
            time.sleep(0.01)
        return "halted"

    return work


def test_a_returning_call_gives_its_value_and_a_raising_one_its_error():
    never = threading.Event()
    assert wait(supervise(lambda: 3, cancel=never, deadline=time.monotonic() + 5)).value == 3
    boom = wait(supervise(lambda: 1 / 0, cancel=never, deadline=time.monotonic() + 5))
    assert isinstance(boom.error, ZeroDivisionError) and not boom.returned


@pytest.mark.timing
def test_a_call_past_its_own_limit_is_given_up_on_at_once():
    started = time.monotonic()
    done = wait(supervise(_forever(threading.Event()), cancel=threading.Event(), deadline=started + 5, limit_s=0.2))
    assert done.stopped == "timeout" and not done.returned and time.monotonic() - started < 1


def test_on_stop_the_call_is_told_to_halt_and_may_finish_within_the_grace():
    cancel, halt = threading.Event(), threading.Event()
    threading.Timer(0.1, cancel.set).start()
    done = wait(supervise(_forever(halt), cancel=cancel, deadline=time.monotonic() + 5, halt=halt, grace_s=2))
    assert done.stopped == "cancelled" and done.returned and done.value == "halted"


@pytest.mark.timing
def test_a_call_that_ignores_halt_is_abandoned_after_the_grace():
    started = time.monotonic()
    done = wait(supervise(_forever(threading.Event()), cancel=threading.Event(), deadline=started + 0.1,
                          halt=threading.Event(), grace_s=0.3))
    assert done.stopped == "time_limit" and not done.returned
    assert 0.3 < time.monotonic() - started < 1.5
