"""A training run on a background thread, for apps: start, watch, stop, one at a time.

    slot = TrainingSlot()                       # one per app
    job = slot.start(backend, train, heldout, config, out_dir, on_event=print)
    job.metrics                                 # metrics.jsonl rows so far (live charts)
    job.progress                                # the latest Progress event (progress bar)
    job.stop(); job.wait()                      # Stop button
    job.result.adapter_dir                      # then adapter.apply_adapter(backend, ...)

The served backend is not modified: the trainer puts LoRA on a copy of its modules over
the same weight tensors (no second copy of the weights).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from envace_demo.errors import ConfigError
from envace_demo.models.base import Backend
from envace_demo.tasks import Task
from envace_demo.train.config import TrainConfig
from envace_demo.train.events import (
    EvalResult,
    Evaluated,
    Progress,
    StepFinished,
    TrainEvent,
    TrainFinished,
    TrainResult,
)
from envace_demo.train.trainer import Trainer

logger = logging.getLogger(__name__)


class TrainingJob:
    """One run of ``Trainer`` on a daemon thread; state readable from any thread."""

    def __init__(
        self,
        backend: Backend,
        train_tasks: list[Task],
        heldout_tasks: list[Task],
        config: TrainConfig,
        out_dir: Path,
        on_event: Callable[[TrainEvent], None] | None = None,
        continue_adapter: bool = False,
    ):
        self._stop = threading.Event()
        # Built here, so a bad configuration fails in the caller's thread.
        self._trainer = Trainer(
            backend, train_tasks, heldout_tasks, config, out_dir, copy_model=True, stop=self._stop,
            continue_adapter=continue_adapter,
        )
        self._on_event = on_event
        self._thread = threading.Thread(target=self._work, name="envace-train", daemon=True)
        self._lock = threading.Lock()
        self.config = config
        self.metrics: list[dict] = []
        self.progress: Progress | None = None
        self.before: EvalResult | None = None
        self.after: EvalResult | None = None
        self.result: TrainResult | None = None
        self.error: Exception | None = None

    def start(self) -> TrainingJob:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Ask the run to end; it drops the step in progress and saves what it has."""
        self._stop.set()

    def wait(self, timeout: float | None = None) -> TrainResult | None:
        self._thread.join(timeout)
        return self.result

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def _work(self) -> None:
        try:
            for event in self._trainer.run():
                with self._lock:
                    self._record(event)
                if self._on_event is not None:
                    self._on_event(event)
        except Exception as err:  # noqa: BLE001 - the UI shows it; a thread must not die silently
            logger.exception("training run failed")  # the traceback, for the operator
            self.error = err

    def _record(self, event: TrainEvent) -> None:
        if isinstance(event, Progress):
            self.progress = event
        elif isinstance(event, StepFinished):
            self.metrics = [*self.metrics, event.metrics]  # a new list: readers never see it half-built
        elif isinstance(event, Evaluated):
            if event.phase == "before":
                self.before = event.result
            else:
                self.after = event.result
        elif isinstance(event, TrainFinished):
            self.result = event.result


class TrainingSlot:
    """At most one training job per app: training is heavy and shares the machine."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.job: TrainingJob | None = None

    def start(
        self,
        backend: Backend,
        train_tasks: list[Task],
        heldout_tasks: list[Task],
        config: TrainConfig,
        out_dir: Path,
        on_event: Callable[[TrainEvent], None] | None = None,
        continue_adapter: bool = False,
    ) -> TrainingJob:
        with self._lock:
            if self.job is not None and self.job.running:
                raise ConfigError("a training job is already running; stop it or wait for it to finish")
            self.job = TrainingJob(
                backend, train_tasks, heldout_tasks, config, out_dir, on_event, continue_adapter
            ).start()
            return self.job
