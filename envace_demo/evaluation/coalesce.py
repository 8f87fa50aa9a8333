"""Episodes of different tasks batched together on an in-process model.

With ``--concurrency K`` and the transformers backend, K episode threads ask the one
model for generations. Alone, each call would wait for the model's lock and run as its
own batch. ``CoalescingBackend`` gathers the calls that arrive together (up to K, or
within a short window) and sends them as one ``generate_many`` batch, so the rows of
different tasks share the decode steps, as a serving engine would batch them.

Rows of one batch share one sampling seed (``generate_many`` takes one), so an episode's
samples depend on what it was batched with: runs at concurrency 1 are the reproducible
ones. Calls whose sampling differs in anything but the seed are not merged.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace

from envace_demo.models.base import Backend, BackendWrapper, Constraint, Generation, Prompt, Sampling, StreamCallback


@dataclass
class _Ask:
    prompts: list[Prompt]
    constraints: list[Constraint | None]
    sampling: Sampling
    on_token: StreamCallback | None
    cancel: threading.Event | None
    result: list[Generation] | None = None
    error: BaseException | None = None
    done: bool = field(default=False)


class _AllCancelled:
    """A cancel switch for a merged batch: set once every caller in it has cancelled."""

    def __init__(self, asks: list[_Ask]):
        self.asks = asks

    def is_set(self) -> bool:
        return all(a.cancel is not None and a.cancel.is_set() for a in self.asks)


class CoalescingBackend(BackendWrapper):
    """Wraps ``inner`` (a backend whose ``generate_many`` batches different prompts).
    ``episodes``: how many callers to wait for; ``window_s``: how long the first caller
    waits for the others; ``max_rows``: the largest merged batch."""

    def __init__(self, inner: Backend, episodes: int, window_s: float = 0.05, max_rows: int = 16):
        super().__init__(inner)
        self.episodes = max(1, episodes)
        self.window_s = window_s
        self.max_rows = max_rows
        self.batches: list[int] = []  # rows of each merged call, for the record and tests
        self._cv = threading.Condition()
        self._pending: list[_Ask] = []
        self._busy = False

    def generate(self, prompt, sampling, constraint=None, on_token=None, cancel=None) -> Generation:
        return self._submit(_Ask([prompt], [constraint], sampling, on_token, cancel))[0]

    def generate_many(self, prompts, sampling, constraints=None, on_token=None, cancel=None) -> list[Generation]:
        constraints = list(constraints) if constraints is not None else [None] * len(prompts)
        if len(constraints) != len(prompts):
            raise ValueError(f"generate_many: {len(prompts)} prompts but {len(constraints)} constraints")
        return self._submit(_Ask(list(prompts), constraints, sampling, on_token, cancel))

    # ---- merging ------------------------------------------------------------------------

    def _submit(self, ask: _Ask) -> list[Generation]:
        with self._cv:
            self._pending.append(ask)
            self._cv.notify_all()
            while not ask.done:
                if self._busy:
                    self._cv.wait()
                    continue
                # This caller leads the next batch: give the other episodes a moment to join.
                self._busy = True
                deadline = time.monotonic() + self.window_s
                while len(self._pending) < self.episodes and self._rows() < self.max_rows:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cv.wait(left)
                batch = self._take()
                self._cv.release()
                try:
                    self._run(batch)
                finally:
                    self._cv.acquire()
                    self._busy = False
                    self._cv.notify_all()
        if ask.error is not None:
            raise ask.error
        assert ask.result is not None
        return ask.result

    def _rows(self) -> int:
        return sum(len(a.prompts) for a in self._pending)

    def _take(self) -> list[_Ask]:
        """The oldest call and those compatible with it, up to ``max_rows`` rows."""
        head = self._pending[0]
        key = replace(head.sampling, seed=None)
        batch, rows = [], 0
        for ask in list(self._pending):
            if replace(ask.sampling, seed=None) != key:
                continue
            if batch and rows + len(ask.prompts) > self.max_rows:
                break
            batch.append(ask)
            rows += len(ask.prompts)
        for ask in batch:
            self._pending.remove(ask)
        return batch

    def _run(self, batch: list[_Ask]) -> None:
        owners: list[tuple[_Ask, int]] = [(a, i) for a in batch for i in range(len(a.prompts))]
        prompts = [a.prompts[i] for a, i in owners]
        constraints = [a.constraints[i] for a, i in owners]

        def on_token(row: int, text: str) -> None:
            ask, local = owners[row]
            if ask.on_token is not None:
                ask.on_token(local, text)

        try:
            if len(batch) == 1:  # nothing merged: the caller's own call, as it asked
                a = batch[0]
                if len(a.prompts) == 1:
                    gens = [self.inner.generate(a.prompts[0], a.sampling, a.constraints[0], a.on_token, a.cancel)]
                else:
                    gens = self.inner.generate_many(a.prompts, a.sampling, a.constraints, a.on_token, a.cancel)
            else:
                self.batches.append(len(prompts))
                gens = self.inner.generate_many(
                    prompts, batch[0].sampling, constraints, on_token, _AllCancelled(batch)  # type: ignore[arg-type]
                )
        except BaseException as err:  # every caller of the batch gets the failure
            for a in batch:
                a.error, a.done = err, True
            return
        at = 0
        for a in batch:
            a.result = gens[at : at + len(a.prompts)]
            at += len(a.prompts)
            a.done = True
