"""Running every task × mode × seed, K episodes at once, resumable.

Each finished episode is appended to ``results.jsonl`` at once (one JSON line,
flushed), so a run that is stopped loses at most the episodes in flight; started
again with the same file it skips every episode already recorded without an error
(those that failed are run again).
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from envace_demo.bfcl_multi import row_fields as bfcl_row_fields
from envace_demo.errors import ConfigError, EnvaceError, TaskError
from envace_demo.evaluation.table import category_of, episode_record
from envace_demo.policy import DEFAULT_POLICY, InputPolicy
from envace_demo.record import Trajectory
from envace_demo.task import EvalTask, Task
from envace_demo.tasks import read_jsonl, task_from_record

RESULTS = "results.jsonl"
RUN_META = "run.json"


@dataclass(frozen=True)
class Job:
    etask: EvalTask
    mode: str
    seed: int

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.etask.task_id, self.mode, self.seed)


def load_eval_tasks(
    paths: Iterable[Path | str],
    limit: int | None = None,
    transform: Callable[[Any], Any] | None = None,
    policy: InputPolicy = DEFAULT_POLICY,
) -> list[EvalTask]:
    """The tasks of each file (at most ``limit`` per file), with ids and categories, read
    under ``policy``. ``transform`` may rewrite each raw record first (MCP: the server's tools)."""
    out: list[EvalTask] = []
    seen: set[str] = set()
    for path in paths:
        path = Path(path)
        for where, record in read_jsonl(path, limit, policy):
            category = category_of(record, path.stem)
            task = task_from_record(transform(record) if transform else record, where, policy=policy)
            task_id, k = f"{path.stem}:{task.name}", 1
            while task_id in seen:  # a name repeated in a file still gets its own episodes
                k += 1
                task_id = f"{path.stem}:{task.name}#{k}"
            seen.add(task_id)
            out.append(EvalTask(task, task_id, category))
    if not out:
        raise TaskError("no tasks: the task files are empty")
    return out


def plan(tasks: list[EvalTask], modes: list[str], seeds: list[int]) -> list[Job]:
    """Every task in every mode with the same seeds; a task's modes are next to each
    other, so an interrupted run still holds complete pairs."""
    return [Job(t, m, s) for t in tasks for s in seeds for m in modes]


def load_results(path: Path) -> dict[tuple[str, str, int], dict]:
    """The recorded episodes by key (the last line of a key wins). A line cut short
    by a stop is skipped."""
    done: dict[tuple[str, str, int], dict] = {}
    if not path.exists():
        return done
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
            done[(rec["task_id"], rec["mode"], int(rec["seed"]))] = rec
        except (ValueError, KeyError, TypeError):
            continue
    return done


def check_run_meta(out_dir: Path, meta: dict) -> None:
    """Refuse to mix episodes of different settings in one results file; record
    the settings of a new one."""
    path = out_dir / RUN_META
    if path.exists():
        try:
            before = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            before = None
        if isinstance(before, dict):
            changed = sorted(k for k in meta if k in before and before[k] != meta[k])
            if changed:
                detail = "; ".join(f"{k}: {before[k]!r} then, {meta[k]!r} now" for k in changed)
                raise ConfigError(
                    f"{out_dir} holds results made with other settings ({detail}); "
                    "resume with the same settings or choose another --out"
                )
    out_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(meta, indent=2, sort_keys=True), encoding="utf-8")


def _error_text(err: BaseException) -> str:
    return str(err) if isinstance(err, EnvaceError) else f"{type(err).__name__}: {err}"


def run_jobs(
    jobs: list[Job],
    run_one: Callable[[Job], Trajectory],
    concurrency: int = 1,
    results: Path | None = None,
    cancel: threading.Event | None = None,
) -> Iterator[dict]:
    """Run ``jobs`` (K at a time) and yield each episode's record as it finishes.

    ``run_one`` runs one episode (it should honour ``cancel``); whatever it raises
    becomes that episode's ``error`` and the others go on. With ``results``, each record
    is appended there as it comes. Once ``cancel`` is set no job starts, and episodes that
    end ``cancelled`` are neither yielded nor recorded. An interrupt sets ``cancel``.
    """
    if concurrency < 1:
        raise ConfigError(f"concurrency must be at least 1, not {concurrency}")
    cancel = cancel or threading.Event()

    def work(job: Job) -> dict:
        try:
            traj = run_one(job)
        except Exception as err:  # one episode's failure must not end the run
            return episode_record(job.etask.task_id, job.etask.category, job.mode, job.seed, None, _error_text(err))
        rec = episode_record(job.etask.task_id, job.etask.category, job.mode, job.seed, traj)
        rec.update(bfcl_row_fields(traj))  # a BFCL multi-turn entry: its decoded calls and BFCL's verdict
        return rec

    sink = None
    if results is not None:
        results.parent.mkdir(parents=True, exist_ok=True)
        sink = open(results, "a", encoding="utf-8")
        if sink.tell() and not _ends_with_newline(results):
            sink.write("\n")  # a line cut short by a stop stays on its own (and is skipped)
    try:
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="envace-eval") as pool:
            queue = iter(jobs)
            inflight: dict = {}

            def fill() -> None:
                while len(inflight) < concurrency and not cancel.is_set():
                    job = next(queue, None)
                    if job is None:
                        return
                    inflight[pool.submit(work, job)] = job

            try:
                fill()
                while inflight:
                    finished, _ = wait(list(inflight), return_when=FIRST_COMPLETED)
                    for future in finished:
                        inflight.pop(future)
                        rec = future.result()
                        if rec.get("ended") == "cancelled":
                            continue  # stopped midway: not a result, and run again on resume
                        if sink is not None:
                            sink.write(json.dumps(rec, ensure_ascii=False) + "\n")
                            sink.flush()
                        yield rec
                    fill()
            except BaseException:  # Ctrl-C, or the consumer stopped: end the episodes in flight
                cancel.set()
                raise
    finally:
        if sink is not None:
            sink.close()


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, 2)
        return f.read(1) == b"\n"


class Progress:
    """A tqdm bar over the episodes: done, errors and generated tokens per second."""

    def __init__(self, total: int, initial: int = 0, disable: bool = False):
        from tqdm import tqdm

        self.bar = tqdm(total=total, initial=initial, unit="episode", desc="eval", disable=disable, dynamic_ncols=True)
        self.errors = 0
        self.tokens = 0
        self.started = time.monotonic()

    def update(self, rec: dict) -> None:
        self.errors += bool(rec.get("error"))
        self.tokens += int(rec.get("tokens") or 0)
        rate = self.tokens / max(time.monotonic() - self.started, 1e-6)
        self.bar.set_postfix(errors=self.errors, tok_s=f"{rate:.1f}", refresh=False)
        self.bar.update(1)

    def write(self, text: str) -> None:
        """A line above the bar, on stderr (stdout carries the table or the JSON)."""
        import sys

        self.bar.write(text, file=sys.stderr)

    def close(self) -> None:
        self.bar.close()


# Generations an episode typically makes (two actor turns; a call rehearsed before it is
# committed), in units of one generation; a parallel round of N rows costs about one row
# plus a quarter per extra row on a CPU (batched decode).
def _generations(mode: str, n: int) -> float:
    if mode == "none":
        return 2.0
    committed = 4.0
    if mode == "parallel":
        return committed + 4.0 * (1 + 0.25 * (n - 1))
    return committed + 4.0 * n  # sequential: one attempt after another


def estimate_seconds(
    episodes: dict[str, int],
    n: int,
    max_new_tokens: int,
    observed: dict[str, float] | None = None,
    tok_s: float = 20.0,
) -> float:
    """Rough wall time of ``episodes`` (mode -> count). ``observed`` (mode -> mean
    seconds of an episode measured on this model) wins where known; otherwise a guess
    from the token budget: each generation about half of ``max_new_tokens`` at ``tok_s``."""
    observed = observed or {}
    total = 0.0
    for mode, count in episodes.items():
        each = observed.get(mode)
        if each is None:
            each = _generations(mode, n) * max_new_tokens / 2 / max(tok_s, 1e-3)
        total += count * each
    return total
