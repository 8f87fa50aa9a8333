"""Fair shares of the model queue: one model job per browser session at a time, a few per
client address, a job whose client went away cancelled, and each job's wait in the queue.

gradio's queue knows each job (an ``Event``: its session, its request, when it joined, and
``alive``, which it clears when the client's stream closes); it has no per-visitor limit.
``install`` adds the limits where jobs join (``Queue.push``); ``current_job`` finds the job
a handler runs for, so that the handler can measure its wait and stop when its client is
gone. A job that is not queued (an MCP tool call) has no such watch.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, TypeVar

from gradio.context import LocalContext

from envace_demo.ui.common import MANUAL_QUEUE, MODEL_QUEUE

T = TypeVar("T")
WATCH_S = 0.2  # how often a running job checks that its client is still there
ONE_PER_SESSION = (
    "this page already has a run waiting or running (one at a time): wait for it to end, or press Stop"
)


def too_many_text(limit: int) -> str:
    return (
        f"this address already has {limit} runs waiting or running, the most one visitor may have: "
        "wait for one to end"
    )


class Limits:
    """Refuses a model job at the door of the queue when its session already has one, or its
    client address has ``per_client`` waiting or running. ``forwarded``: the client's address
    is the first of X-Forwarded-For (a Space's proxy sets it; its own address is everyone's)."""

    def __init__(
        self, per_client: int | None, forwarded: bool, queues: tuple[str, ...] = (MODEL_QUEUE, MANUAL_QUEUE)
    ):
        self.per_client, self.forwarded, self.queues = per_client, forwarded, queues
        self._joining: Counter = Counter()  # jobs between the check and their place in the queue
        self._answered: set[str] = set()  # jobs whose result was sent, still among the active ones

    def install(self, demo: Any) -> None:
        queue = demo._queue
        push = queue.push

        async def fair_push(body: Any, request: Any, username: str | None) -> tuple:
            fn = demo.fns.get(body.fn_index) if body.fn_index is not None else None
            if fn is None or fn.concurrency_id not in self.queues:
                return await push(body=body, request=request, username=username)
            keys = (("session", body.session_hash), ("client", self.client_of(request)))
            refusal = self.refusal(queue, *keys)
            if refusal is not None:
                return False, refusal, "error"
            self._joining.update(keys)
            try:
                return await push(body=body, request=request, username=username)
            finally:
                self._joining.subtract(keys)

        queue.push = fair_push
        send = queue.send_message

        def send_message(event: Any, message: Any) -> None:
            # Answered: the client may send its next job at once, while gradio is still
            # tidying this one up; it no longer counts.
            if getattr(message, "msg", None) == "process_completed":
                self._answered.add(event._id)
            send(event, message)

        queue.send_message = send_message

    def client_of(self, request: Any) -> str:
        headers = getattr(request, "headers", None) or {}
        forwarded = headers.get("x-forwarded-for", "") if self.forwarded else ""
        first = forwarded.split(",")[0].strip()
        if first:
            return first
        client = getattr(request, "client", None)
        return getattr(client, "host", None) or "unknown"

    def refusal(self, queue: Any, session: tuple[str, Any], client: tuple[str, str]) -> str | None:
        """Why a new job of this session and client may not join (None: it may)."""
        sessions, clients = Counter(), Counter()
        for event in self._jobs(queue):
            sessions[event.session_hash] += 1
            clients[self.client_of(event.request)] += 1
        if session[1] is not None and sessions[session[1]] + self._joining[session] >= 1:
            return ONE_PER_SESSION
        if self.per_client is not None and clients[client[1]] + self._joining[client] >= self.per_client:
            return too_many_text(self.per_client)
        return None

    def _jobs(self, queue: Any) -> Iterator[Any]:
        """The model jobs waiting or running (a running one whose client left included: it is
        still being stopped)."""
        for cid in self.queues:
            waiting = queue.event_queue_per_concurrency_id.get(cid)
            yield from (waiting.queue if waiting is not None else ())
        active = {e._id for job in queue.active_jobs for e in job or ()}
        self._answered &= active  # forget the ones gradio has let go
        for job in queue.active_jobs:
            for event in job or ():
                if event.concurrency_id in self.queues and event._id not in self._answered:
                    yield event


@dataclass
class Job:
    """The queued job a handler runs for: its wait in the queue, and whether its client is there."""

    event: Any
    queue: Any
    queued_seconds: float

    def gone(self) -> bool:
        """The client closed its stream (gradio cleared ``alive``) or cancelled the job."""
        return not self.event.alive or self.event._id not in self.queue.event_ids_to_events


def current_job() -> Job | None:
    """The queued job of the running handler (None outside the queue)."""
    blocks, event_id = LocalContext.blocks.get(None), LocalContext.event_id.get(None)
    queue = getattr(blocks, "_queue", None)
    event = queue.event_ids_to_events.get(event_id) if queue is not None and event_id else None
    if event is None:
        return None
    return Job(event, queue, max(0.0, time.monotonic() - event.enqueue_time))


def _watch(job: Job | None, cancel: threading.Event) -> threading.Event:
    """Set ``cancel`` once ``job``'s client is gone; returns the switch that ends the watch."""
    done = threading.Event()

    def watch() -> None:
        while not done.wait(WATCH_S):
            if job.gone():
                cancel.set()
                return

    if job is not None:
        threading.Thread(target=watch, name="envace-client-watch", daemon=True).start()
    return done


@contextmanager
def cancelled_when_gone(job: Job | None, cancel: threading.Event) -> Iterator[threading.Event]:
    """``cancel`` set as soon as ``job``'s client is gone, while the block runs (a plain call)."""
    done = _watch(job, cancel)
    try:
        yield cancel
    finally:
        done.set()


def streamed_until_gone(job: Job | None, cancel: threading.Event, updates: Iterator[T]) -> Iterator[T]:
    """``updates`` passed on, ``cancel`` set as soon as ``job``'s client is gone. gradio closes
    a streaming handler whose client left at its next update, often before the watch sees it:
    then ``cancel`` is set first and the rest of ``updates`` drained on a thread of its own, so
    that the work under them ends through its cancel switch (closing them would leave a
    generation running on with nothing to stop it)."""
    done = _watch(job, cancel)
    try:
        for update in updates:
            yield update
    except GeneratorExit:
        cancel.set()
        threading.Thread(target=_drain, args=(updates,), name="envace-drain", daemon=True).start()
        raise
    finally:
        done.set()


def _drain(updates: Iterator) -> None:
    for _ in updates:
        pass
