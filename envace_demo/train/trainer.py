"""Role-wise GRPO with LoRA: a compact loop of our own on torch + peft + accelerate.

Why not TRL's ``GRPOTrainer`` (pinned 1.16): its advantages are computed per
sequence inside the private ``_generate_and_score_completions``, with no hook for
a per-role baseline; and its batch is "one prompt -> num_generations
completions", while an EnvACE rollout is a multi-turn, two-role episode whose
rows have different prompts (each actor turn, each rehearsal) in varying numbers.
Bending TRL to that means overriding private methods that change between
releases; the loop below is short, uses our engine for rollouts (so training
sees exactly the demo's prompts, grammar and parser), and reads like the paper.

One step (method doc §4):
  1. rollouts: for each of ``prompts_per_step`` training tasks, G imagined
     episodes (actor + rehearser, no real environment);
  2. rewards: the task's checklist score on every generation of the episode,
     minus ``empty_penalty`` for an empty one;
  3. advantages: reward minus the mean of the same role in the same group;
  4. one AdamW step on the GRPO loss over all rows (own tokens only).

Constrained decoding: the grammar masks tokens at sampling time; the loss uses
the model's unmasked log-probs of the very tokens sampled (as TRL does with
guided decoding). Rows whose advantage is zero and that have no KL term are
skipped: their gradient is zero.

Several GPUs: run the same command under ``accelerate launch``. Each process
rolls out its own share of the step's tasks and evaluates its share of the
held-out tasks; gradients are summed across processes before the step (no DDP
wrapper, so processes may differ in how many rows they hold). On CPU with one
process ``Accelerator`` changes nothing.
"""

from __future__ import annotations

import contextlib
import copy
import json
import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from envace_demo.errors import ConfigError, StorageError
from envace_demo.models.base import Backend
from envace_demo.record import Rehearsal
from envace_demo.tasks import Task
from envace_demo.train.advantages import assign_advantages
from envace_demo.train.config import TrainConfig
from envace_demo.train.evaluate import eval_jobs, run_jobs, summarize
from envace_demo.train.events import (
    EvalResult,
    Evaluated,
    Progress,
    StepFinished,
    TrainEvent,
    TrainFinished,
    TrainResult,
    TrainStarted,
)
from envace_demo.train.metrics import step_metrics
from envace_demo.train.rewards import Score, row_reward, score_rehearsal, trainable
from envace_demo.train.rollout import Group, rollout_group
from envace_demo.train.shared import sharing_weights
from envace_demo.train.update import PolicyUpdate

ADAPTER_DIR = "adapter"
METRICS_FILE = "metrics.jsonl"
SUMMARY_FILE = "summary.json"
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]


class Trainer:
    """One fine-tuning run. ``run()`` yields ``TrainEvent``s; the last is ``TrainFinished``.

    ``backend`` must be a local ``TransformersBackend``; a LoRA adapter it serves is
    trained further with ``continue_adapter`` (the saved adapter then holds both), else
    training starts from the base weights. With ``copy_model`` (the default) the LoRA
    adapter goes on a copy of its modules over the same weight tensors (``train.shared``:
    no second copy of the weights; a served adapter is copied whole), so the model served to
    others is untouched until the adapter is applied (``adapter.apply_adapter``); the KL
    term's reference is the adapter switched off;
    the CLI, which owns its model, passes False. ``stop`` ends the run early: the
    current step is dropped, the adapter of the steps done is still saved.
    ``scorer`` scores one imagined rollout (default: the task's checklist; a judge
    model would plug in here).
    """

    def __init__(
        self,
        backend: Backend,
        train_tasks: list[Task],
        heldout_tasks: list[Task],
        config: TrainConfig,
        out_dir: Path,
        *,
        copy_model: bool = True,
        stop: threading.Event | None = None,
        scorer: Callable[[Task, Rehearsal], Score] = score_rehearsal,
        continue_adapter: bool = False,
    ):
        from envace_demo.models.transformers_backend import TransformersBackend

        if not isinstance(backend, TransformersBackend):
            raise ConfigError(
                f"training needs a local transformers model; {backend.info.model_id} has no weights here "
                "(use --model embedded, a hub id or a local folder)"
            )
        self.train_tasks = [t for t in train_tasks if trainable(t)]
        if not self.train_tasks:
            raise ConfigError(
                "no training task has a check: a reward needs one (split 'train' with a 'check')"
            )
        self.heldout_tasks = [t for t in heldout_tasks if trainable(t)]
        self.backend = backend
        self.config = config
        self.out_dir = Path(out_dir)
        self.copy_model = copy_model
        self.stop = stop or threading.Event()
        self.scorer = scorer
        self.continue_adapter = continue_adapter

    # ------------------------------------------------------------------ setup

    def _setup(self) -> None:
        import torch
        from accelerate import Accelerator
        from peft import LoraConfig, PeftModel, get_peft_model

        from envace_demo.models.adapters import shared_weights

        cfg = self.config
        base = self.backend.model  # type: ignore[attr-defined]
        self.accelerator = Accelerator(cpu=base.device.type == "cpu")
        torch.manual_seed(cfg.seed)
        if isinstance(base, PeftModel):  # an adapter is served
            base = copy.deepcopy(base) if self.copy_model else base
            if self.continue_adapter:
                # Keep training the adapter it has (a warm start's): the saved adapter holds both.
                # A rehearser adapter of its own is dropped: the actor's goes on for both roles.
                shared_weights(base)
                for name, param in base.named_parameters():
                    param.requires_grad = "lora_" in name
                self._setup_model(base.eval())
                return
            # From the base weights: the saved adapter then applies where any adapter does.
            base = base.unload()
        elif self.copy_model:  # the served model's modules stay as they are; the weights are shared
            base = sharing_weights(base)
        if self.accelerator.num_processes > 1:
            base = base.to(self.accelerator.device)
        layers = base.config.get_text_config().num_hidden_layers
        lora = LoraConfig(
            r=cfg.lora_rank,
            lora_alpha=2 * cfg.lora_rank,
            lora_dropout=0.0,
            target_modules=LORA_TARGETS,
            layers_to_transform=list(range(layers - cfg.lora_layers, layers)) if cfg.lora_layers else None,
            bias="none",
        )
        # No dropout anywhere: eval mode keeps the log-probs of training equal to those sampled.
        self._setup_model(get_peft_model(base, lora).eval())

    def _setup_model(self, model) -> None:
        from envace_demo.train.policy import PolicyBackend

        cfg = self.config
        self.model = model
        if not self.copy_model:  # trained in place: the served backend's kept caches are stale
            self.backend.row_prefixes.clear()  # type: ignore[attr-defined]
        tokenizer = self.backend.tokenizer  # type: ignore[attr-defined]
        self.policy = PolicyBackend.like(
            self.backend, self.model, f"{self.backend.info.model_id} + LoRA (training)"
        )
        # The token a finished turn ends with (the chat templates close turns with it).
        self.stop_id = tokenizer.get_added_vocab().get("<|im_end|>", self.policy.stop_ids[0])
        self.pad_id = self.policy.pad_id
        self.update = PolicyUpdate(self.model, self.policy, self.accelerator, cfg, self.pad_id)
        self.tokenize = lambda text: tokenizer(text, add_special_tokens=False).input_ids

    # ------------------------------------------------------------------ the run

    def run(self) -> Iterator[TrainEvent]:
        cfg = self.config
        started = time.monotonic()
        self._setup()
        main = self.accelerator.is_main_process
        if main:
            with _saving("run folder", self.out_dir):
                self.out_dir.mkdir(parents=True, exist_ok=True)
                (self.out_dir / METRICS_FILE).write_text("", encoding="utf-8")
        yield TrainStarted(
            cfg.to_dict(), [t.name for t in self.train_tasks], [t.name for t in self.heldout_tasks], cfg.steps
        )

        before = yield from self._evaluate("before", step=0)
        order = random.Random(cfg.seed)
        queue: list[Task] = []
        steps_done = 0
        for step in range(1, cfg.steps + 1):
            if self.stop.is_set():
                break
            picked = []
            for _ in range(cfg.prompts_per_step):  # walk shuffled passes over the training tasks
                if not queue:
                    queue = order.sample(self.train_tasks, len(self.train_tasks))
                picked.append(queue.pop())
            done = yield from self._step(step, picked)
            if done is None:  # stopped during the step
                break
            metrics, groups = done
            steps_done = step
            metrics["elapsed"] = round(time.monotonic() - started, 2)
            if main:
                with _saving("metrics", self.out_dir / METRICS_FILE), (self.out_dir / METRICS_FILE).open(
                    "a", encoding="utf-8"
                ) as fh:
                    fh.write(json.dumps(metrics) + "\n")
            yield StepFinished(step, cfg.steps, metrics, groups)

        stopped = self.stop.is_set()
        after = None if stopped else (yield from self._evaluate("after", step=steps_done))
        adapter_dir = None
        if steps_done and main:
            yield Progress("save", 0, 1, steps_done)
            adapter_dir = self.out_dir / ADAPTER_DIR
            with _saving("adapter", adapter_dir):
                self.model.save_pretrained(adapter_dir)
            yield Progress("save", 1, 1, steps_done)
        result = TrainResult(
            self.out_dir, adapter_dir, steps_done, stopped, before, after, time.monotonic() - started
        )
        if main:
            summary = {**result.to_dict(), "config": cfg.to_dict(), "model": self.backend.info.model_id}
            with _saving("run summary", self.out_dir / SUMMARY_FILE):
                (self.out_dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=2), encoding="utf-8")
        yield TrainFinished(result)

    # ------------------------------------------------------------------ phases

    def _evaluate(self, phase: str, step: int) -> Iterator[TrainEvent]:
        from accelerate.utils import gather_object

        if not self.heldout_tasks:
            return None
        jobs = eval_jobs(self.heldout_tasks, self.config)
        acc = self.accelerator
        mine = jobs[acc.process_index :: acc.num_processes]
        stage = f"eval_{phase}"
        records = []
        yield Progress(stage, 0, len(mine), step)  # type: ignore[arg-type]
        for done, record in enumerate(
            run_jobs(self.policy, self.heldout_tasks, mine, self.config, self.stop), 1
        ):
            records.append(record)
            yield Progress(stage, done, len(mine), step)  # type: ignore[arg-type]
        if self.stop.is_set():
            return None
        if acc.num_processes > 1:
            records = gather_object(records)
        result: EvalResult = summarize(len(self.heldout_tasks), self.config.eval_samples, records)
        yield Evaluated(phase, result)  # type: ignore[arg-type]
        return result

    def _step(self, step: int, tasks: list[Task]) -> Iterator[TrainEvent]:
        cfg, acc = self.config, self.accelerator
        t0 = time.monotonic()
        mine = list(enumerate(tasks))[acc.process_index :: acc.num_processes]
        groups: list[Group] = []
        yield Progress("rollout", 0, len(mine), step)
        for done, (g, task) in enumerate(mine, 1):
            seed = 1_000_003 * (cfg.seed + 1) + 1009 * step + g
            group = rollout_group(self.policy, task, g, cfg, seed, self.tokenize, self.stop_id, self.stop)
            if self.stop.is_set():
                return None
            self._score(group)
            groups.append(group)
            yield Progress("rollout", done, len(mine), step)
        rows = [row for group in groups for row in group.rows if row.completion_ids]
        assign_advantages(rows, scale_std=cfg.scale_std)
        rollout_seconds = time.monotonic() - t0

        yield Progress("update", 0, 1, step)
        losses = self.update.step(rows)
        for _ in range(1, self.config.updates_per_batch):  # later steps: the clip bounds the ratio
            losses = self.update.step(rows)
        yield Progress("update", 1, 1, step)
        metrics = {"step": step, **step_metrics(groups, rows, losses, cfg, acc)}
        metrics["seconds"] = round(time.monotonic() - t0, 2)
        metrics["rollout_seconds"] = round(rollout_seconds, 2)
        return metrics, groups

    def _score(self, group: Group) -> None:
        group.scores = {r.index: self.scorer(group.task, r) for r in group.rehearsals}
        for row in group.rows:
            row.reward = row_reward(group.scores[row.episode].value, row.empty, self.config.empty_penalty)

@contextlib.contextmanager
def _saving(what: str, path: Path):
    """An OSError while writing ``path`` (a full disk, a read-only folder) becomes a
    StorageError naming what was being saved, where, and why."""
    try:
        yield
    except OSError as err:
        raise StorageError(what, path, err) from err
