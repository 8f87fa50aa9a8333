"""The shared model: loaded once, in the background, so the page serves at once.

The backend is the one thing every visitor shares (it is too large to copy); each
visitor's environment, trajectories and settings live in their own session.
"""

from __future__ import annotations

import gc
import logging
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable

from envace_demo import budget as budget_mod
from envace_demo.errors import EnvaceError, ModelError
from envace_demo.models.base import Backend
from envace_demo.models.speed import measure_speed
from envace_demo.plan import Plan
from envace_demo.settings import Settings

Loader = Callable[[Settings], Backend]
Measure = Callable[[Backend], budget_mod.Speed]
# The hardware plan of a model's settings, given the decoding speed measured (or None).
Planner = Callable[[Settings, "float | None"], "Plan | None"]
log = logging.getLogger(__name__)


def _default_loader(settings: Settings) -> Backend:
    from envace_demo.models.loader import load_configured  # heavy: torch, transformers

    return load_configured(settings)


@dataclass(frozen=True)
class HolderStatus:
    state: str  # "loading", "ready" or "failed"
    model: str  # what was asked for ("default" when the settings leave it to the machine)
    seconds: float  # time spent loading, or that it took
    error: str | None = None
    info: dict | None = None  # backend.info.to_dict() once ready
    speed: budget_mod.Speed | None = None  # measured once loaded (None: not measured)
    budget: budget_mod.Budget | None = None  # defaults fitted to that speed
    adapter: str | None = None  # the fine-tuned adapter applied to the model, by name
    note: str | None = None  # a failed switch: what failed, and that the working model stayed
    plan: Plan | None = None  # the hardware plan the budget follows (a GPU of a known flavor)


class ModelHolder:
    """Loads a backend on a thread; ``wait`` hands it out once ready.

    Once loaded, the backend's speed is measured (``measure``; by default only for the
    real loader) and the run defaults fitted to it. On a GPU the plan knows (``planner``)
    the defaults are the plan's, made again with the measured speed; on ZeroGPU nothing is
    measured at load (CUDA is spaces' until a GPU call): the plan's speed is the start, and
    each finished run's own timings correct it (``observe``). A switch that fails loads the
    previous model again, so the page keeps a working one.
    """

    def __init__(
        self, settings: Settings, loader: Loader | None = None, measure: Measure | None = None,
        planner: Planner | None = None,
    ):
        self.settings = settings
        self._planner = planner
        self._plan: Plan | None = None
        self._measure = measure if measure is not None or loader is not None else measure_speed
        self._loader = loader or _default_loader
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._backend: Backend | None = None
        self._error: str | None = None
        self._started = 0.0
        self._took = 0.0
        self._thread: threading.Thread | None = None
        self._released: str | None = None  # the model a switch let go of, named in a failure
        self._working: Settings | None = None  # the settings of the last model that loaded
        self._speed: budget_mod.Speed | None = None
        self._budget: budget_mod.Budget | None = None
        self._adapter: str | None = None
        self._note: str | None = None

    def start(self, settings: Settings | None = None) -> None:
        """Begin loading (again, with ``settings`` to switch models). Returns at once."""
        with self._lock:
            self._begin(settings)
            self._thread = threading.Thread(target=self._load, name="envace-model-load", daemon=True)
            self._thread.start()

    def load_here(self, settings: Settings | None = None) -> None:
        """Load in the calling thread and return when done (ZeroGPU: the weights must be
        placed on cuda at import, in the main thread). A failure is kept for ``status``."""
        with self._lock:
            self._begin(settings)
        self._load()

    def _begin(self, settings: Settings | None) -> None:
        if self._thread is not None and self._thread.is_alive():
            raise ModelError("a model is already loading; wait for it to finish")
        if settings is not None:
            self.settings = settings
        # Released before loading the next one: two large models may not fit together.
        # Running episodes keep their own reference until they end.
        self._released = self._backend.info.model_id if self._backend is not None else None
        self._backend, self._error = None, None
        self._speed = self._budget = self._adapter = self._note = self._plan = None
        self._ready.clear()
        self._started = time.monotonic()

    def _load(self) -> None:
        gc.collect()  # release a previous model before loading the next one
        _empty_cuda_cache()
        backend, error = self._try_load(self.settings)
        previous = self._working
        if backend is None and previous is not None and previous != self.settings:
            log.error("switch failed (%s); loading the previous model again", error)
            gc.collect()
            backend, again = self._try_load(previous)
            if backend is not None:
                self._note = f"{error}; kept {backend.info.model_id}"
                self.settings = previous
            else:
                error += f" (the previous model, {self._released}, could not be loaded again: {again})"
        if backend is not None:
            self._working = self.settings
            self._fit(backend)
        self._backend, self._error = backend, error if backend is None else None
        self._took = time.monotonic() - self._started
        if self._backend is not None:
            log.info("model ready: %s in %.1f s", self._backend.info.model_id, self._took)
        else:
            log.error("model failed to load after %.1f s: %s", self._took, self._error)
        self._ready.set()

    def _try_load(self, settings: Settings) -> tuple[Backend | None, str | None]:
        try:
            return self._loader(settings), None
        except EnvaceError as err:
            return None, str(err)
        except Exception as err:  # any failure must reach the page, not kill the thread silently
            log.exception("loading %s failed", settings.model or "the default model")  # for the operator
            return None, f"could not load {settings.model or 'the default model'}: {type(err).__name__}: {err}"

    def _fit(self, backend: Backend) -> None:
        """Measure the backend's speed and fit the run defaults to it (skipped without
        a measure: the settings' own defaults then apply). A planned GPU: the plan's."""
        planned = self._planner(self.settings, None) if self._planner is not None else None
        if planned is not None:
            self._follow(planned, backend)
            return
        if self.settings.zero_gpu:  # measuring would touch CUDA outside a GPU call
            log.info("ZeroGPU: a model the plan does not know; the settings' defaults apply")
            return
        if self._measure is None or not self.settings.target_seconds:
            return
        try:
            self._speed = self._measure(backend)
        except Exception as err:  # a failed measurement must not fail a model that loaded
            log.warning("could not measure the model's speed (%s): the settings' defaults apply", err)
            return
        self._budget = budget_mod.fit(self._speed, self.settings.target_seconds)
        log.info("budget: %s", budget_mod.describe(self._budget, self._speed))

    def _follow(self, planned: Plan, backend: Backend) -> None:
        """The plan's defaults; off ZeroGPU made again with the speed measured here."""
        speed = budget_mod.Speed(decode=planned.decode_tokens_per_s, prefill=planned.prefill_tokens_per_s)
        if not self.settings.zero_gpu and self._measure is not None:
            try:
                speed = self._measure(backend)
            except Exception as err:  # a failed measurement must not fail a model that loaded
                log.warning("could not measure the model's speed (%s): the plan's own applies", err)
            else:
                planned = self._planner(self.settings, speed.decode) or planned
        self._plan, self._speed = planned, speed
        self._budget = budget_of(planned)
        log.info("plan: %s", planned.to_dict())

    def observe(self, trajectory) -> None:
        """Move the measured speed toward what a finished run saw (its committed actor
        turns: one row each), within what the model's size makes plausible, and fit the
        limit to it, so estimates and the next run's limit follow the machine's load."""
        if self._speed is None:
            return
        turns = [(t.prompt_tokens, t.act_tokens, t.act_seconds) for t in trajectory.turns]
        backend = self._backend
        bounds = budget_mod.plausible_for(backend) if backend is not None else None
        self._speed = budget_mod.observed(self._speed, turns, bounds=bounds)
        if self._budget is not None:
            self._budget = budget_mod.refit(self._budget, self._speed, self.settings.target_seconds)

    def set_adapter(self, name: str | None) -> None:
        """Record the adapter applied to the loaded model (None: removed), for the header."""
        self._adapter = name

    def status(self) -> HolderStatus:
        model = self.settings.model or "default"
        if not self._ready.is_set():
            return HolderStatus("loading", model, time.monotonic() - self._started if self._started else 0.0)
        if self._backend is None:
            return HolderStatus("failed", model, self._took, error=self._error or "not loaded")
        return HolderStatus(
            "ready",
            self.settings.model or "default",
            self._took,
            info=self._backend.info.to_dict(),
            speed=self._speed,
            budget=self._budget,
            adapter=self._adapter,
            note=self._note,
            plan=self._plan,
        )

    def wait(self, timeout: float) -> Backend:
        """The backend, once loaded; ModelError when loading failed or took too long."""
        if self._started == 0.0:
            raise ModelError("no model is loading: the app did not start one")
        if not self._ready.wait(timeout):
            raise ModelError(f"the model is still loading after {timeout:.0f} s; try again shortly")
        if self._backend is None:
            raise ModelError(self._error or "the model failed to load")
        return self._backend


def budget_of(planned: Plan) -> budget_mod.Budget:
    """The run defaults of a hardware plan, as the app's budget."""
    return budget_mod.Budget(
        n=planned.n,
        max_steps=planned.max_steps,
        max_new_tokens=planned.max_new_tokens,
        episode_seconds=planned.episode_seconds,
        estimate_seconds=planned.estimated_episode_seconds,
    )


def _empty_cuda_cache() -> None:
    torch = sys.modules.get("torch")  # a previous model imported it; otherwise nothing to free
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()
