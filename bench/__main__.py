"""``python -m bench [--quick] [--json] [--only SECTION ...]``

Measures the demo on this machine against the goals of ``bench/report.py`` and
writes ``bench/results.json`` and ``bench/RESULTS.md``. ``--quick`` (fewer repeats,
shorter runs) stays under 10 minutes on 2 idle CPU cores; ``--json`` prints the
result object on stdout (progress goes to stderr). Sections: startup, decode,
dtype, parallel, grpo, eval_speed, gpu (only with CUDA), rehearsal (every example task
× 3 seeds, parallel and without rehearsal; ``--quick``: 3 tasks × 1 seed), heldout (the base
model against the shipped adapter on the held-out example tasks and the default runs,
each a fresh process; ``bench/heldout.py``), worlds (the rehearser's greedy rehearsals of
committed writes in worlds never trained on and in the seeded world, beside a lookup of the
seeded world's training data and the schema-only and echo baselines; ``bench/worlds.py``).

``--quick`` runs a smaller sample of each section and leaves out its slowest parts: one
warm start and no memory run (``peak_rss_mb``), no ``eval_speed``, the held-out section's
default runs without its evals (the ``heldout_*`` figures: full run only), 8 world calls a side.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

from bench import report

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ("startup", "decode", "dtype", "parallel", "grpo", "eval_speed", "gpu", "rehearsal", "heldout", "worlds")


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def machine_info() -> dict:
    import platform

    import torch

    return {
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "load_before": round(os.getloadavg()[0], 2),
        "when": datetime.datetime.now().isoformat(timespec="seconds"),
    }


def _bfcl_tasks(limit: int):
    from bench.dtype import BFCL_SIMPLE
    from envace_demo.tasks import load_task_file

    return load_task_file(BFCL_SIMPLE, limit=limit)


def _actor_prompt(backend, task) -> str:
    from envace_demo.prompts import Conversation, actor_prompt

    return backend.prompt_text(actor_prompt(backend, Conversation(task.prompt), task.tools))


class Bench:
    def __init__(self, quick: bool, cache_dir: Path, threads: int | None = None):
        self.quick = quick
        self.threads = threads
        self.cache_dir = cache_dir
        self.figures: dict = {}
        self.details: dict = {}
        self.notes: dict = {}
        self._backends: dict = {}

    def backend(self, dtype: str = "auto"):
        if dtype == "auto":  # what the app gets on CPU
            from envace_demo.models.transformers_backend import CPU_AUTO_DTYPE

            dtype = CPU_AUTO_DTYPE
        if dtype not in self._backends:
            from envace_demo.models.loader import load_backend

            start = time.perf_counter()
            self._backends[dtype] = load_backend("embedded", dtype=dtype, device="cpu", cache_dir=self.cache_dir)
            log(f"loaded the embedded model ({dtype}) in {time.perf_counter() - start:.1f} s")
        return self._backends[dtype]

    # ---- sections ----------------------------------------------------------------

    def startup(self) -> None:
        from bench.startup import measure_startup

        # --quick: one warm start and the cold one; the memory run (an N=4 episode, a minute
        # on 2 cores, for peak_rss_mb) only in the full run.
        warm_runs = 1 if self.quick else 3
        warm = []
        for i in range(warm_runs):
            result = measure_startup(self.cache_dir, memory_run=i == 0 and not self.quick, threads=self.threads)
            log(f"warm start {i + 1}: {result}")
            if result.error:
                raise RuntimeError(result.error)
            warm.append(result)
        with tempfile.TemporaryDirectory(prefix="envace-bench-cold-") as empty:
            cold = measure_startup(Path(empty), threads=self.threads)
        log(f"cold start: {cold}")
        self.figures["page_served_s"] = round(statistics.median(r.page_served_s for r in warm), 2)
        self.figures["model_ready_s"] = round(statistics.median(r.model_ready_s for r in warm), 2)
        self.figures["cold_model_ready_s"] = round(cold.model_ready_s, 2) if cold.model_ready_s else None
        if cold.error:
            self.notes["cold_model_ready_s"] = cold.error
        first = warm[0]
        if self.quick:
            self.notes["peak_rss_mb"] = "not measured in --quick (the full run's first warm start measures it)"
        else:
            self.figures["peak_rss_mb"] = {"idle": first.idle_rss_mb, "parallel_n4": first.run_peak_rss_mb}
        self.details["startup"] = {
            "warm": [vars(r) for r in warm],
            "cold": vars(cold),
            "cold_page_served_s": cold.page_served_s,
        }

    def decode(self) -> None:
        from bench.decode import constrained_ratio, decode_tok_s, roofline_fraction, roofline_tok_s, weight_bytes
        from bench.memory_bw import measure_bandwidth
        from envace_demo.models.base import Constraint

        bandwidth = measure_bandwidth(size_mb=512, repeats=5 if self.quick else 11)
        log(f"memory bandwidth: {bandwidth}")
        backend = self.backend()
        task = _bfcl_tasks(1)[0]
        prompt = _actor_prompt(backend, task)
        tokens, repeats = (48, 3) if self.quick else (96, 5)
        runs = decode_tok_s(backend, prompt, tokens, repeats)
        tok_s = statistics.median(r.tok_s for r in runs)
        nbytes = weight_bytes(backend.model)
        fraction = roofline_fraction(tok_s, bandwidth.best_gbs, nbytes)
        log(f"decode {tok_s:.1f} tok/s, roofline {roofline_tok_s(bandwidth.best_gbs, nbytes):.1f} tok/s ({fraction:.2f})")
        constraint = Constraint(role="actor", tools=tuple(task.tools), require_call=True)
        constrained = constrained_ratio(backend, prompt, constraint, 96, 3 if self.quick else 5)
        log(f"constrained: {constrained}")
        self.figures["decode_roofline_fraction"] = round(fraction, 3)
        self.figures["constrained_speed_ratio"] = round(constrained["ratio"], 3)
        self.details["decode"] = {
            "dtype": backend.info.dtype,
            "tok_s": round(tok_s, 2),
            "mean_step_tok_s": round(statistics.median(1 / r.mean_step_s for r in runs), 2),
            "weight_mb": round(nbytes / 2**20, 1),
            "roofline_tok_s": round(roofline_tok_s(bandwidth.best_gbs, nbytes), 2),
            "bandwidth": bandwidth.to_dict(),
            "prompt_tokens": backend.count_tokens(prompt),
            "tokens": tokens,
            "runs": [vars(r) for r in runs],
            "constrained": constrained,
        }

    def dtype(self) -> None:
        from bench.dtype import compare_dtypes
        from envace_demo.tasks import find_task

        tasks = _bfcl_tasks(3 if self.quick else 10)
        backends = {dtype: self.backend(dtype) for dtype in ("float32", "bfloat16")}
        any_backend = backends["float32"]
        long_prompt = _actor_prompt(any_backend, find_task("bank", "check-balance"))  # ~1k tokens: prefill cost
        out = compare_dtypes(backends, _actor_prompt(any_backend, tasks[0]), long_prompt, tasks,
                             48 if self.quick else 96, 2 if self.quick else 5)
        for name, row in out.items():
            v = row["validity"]
            log(f"{name}: decode {row['decode_tok_s']} tok/s, prefill {row['prefill_s']} s "
                f"({row['prefill_tokens']} tokens), valid {v['valid_calls']}/{v['calls']}, correct {v['bfcl_correct']}/{v['tasks']}")
        self.details["dtype"] = out

    def parallel(self) -> None:
        from bench.parallel import batch_pass_ratio, parallel_ratio
        from envace_demo.tasks import find_task

        # An odd count: a median over two seeds is their mean, which one seed whose four
        # runs part early (seed 1 on check-balance) decides.
        seeds = (0, 1, 2) if self.quick else (0, 1, 2, 3, 4)
        figures = parallel_ratio(self.backend(), find_task("bank", "check-balance"), n=4, seeds=seeds)
        log(f"parallel: N=4 {figures.many_s:.1f} s, N=1 {figures.one_s:.1f} s, ratio {figures.ratio:.2f}")
        self.figures["parallel_rehearsal_ratio"] = round(figures.ratio, 3)
        self.details["parallel"] = vars(figures)
        floor = batch_pass_ratio(self.backend().model)
        log(f"parallel: one pass of 4 rows {floor['many_ms']} ms, of 1 row {floor['one_ms']} ms")
        self.figures["batch_pass_ratio"] = floor["ratio"]
        self.details["batch_pass"] = floor
        if not self.quick:
            # The same on a task that writes: an imagined run fetches its reads, so on a read
            # task the N runs are mostly actor turns; here each ends at its rehearsed deposit.
            write = parallel_ratio(self.backend(), find_task("bank", "deposit-cash"), n=4, seeds=seeds)
            log(f"parallel (a write): N=4 {write.many_s:.1f} s, N=1 {write.one_s:.1f} s, ratio {write.ratio:.2f}")
            self.details["parallel_write"] = vars(write)
            self.notes["parallel_rehearsal_ratio"] = (
                f"bank/check-balance (reads); on bank/deposit-cash (a write): {write.ratio:.2f} "
                f"(N=4 {write.many_s:.1f} s, N=1 {write.one_s:.1f} s)")

    def grpo(self) -> None:
        from bench.training import grpo_step_seconds

        figures = grpo_step_seconds(self.backend(), steps=2 if self.quick else 3)
        log(f"grpo: {figures}")
        self.figures["grpo_step_s"] = round(figures["seconds"], 2)
        self.details["grpo"] = figures

    def eval_speed(self) -> None:
        from bench.eval_speed import eval_speedup

        if self.quick:  # 32 episodes over a server, 4 minutes on 2 cores, for a figure with no goal
            self.notes["eval_concurrency_speedup"] = "not measured in --quick (python -m bench --only eval_speed)"
            return
        figures = eval_speedup(self.cache_dir, tokens=32 if self.quick else 48, threads=self.threads or 1)
        log(f"eval over transformers serve: {figures['runs']}, speedup {figures['speedup']:.2f}")
        self.figures["eval_concurrency_speedup"] = figures["speedup"]
        self.details["eval_speed"] = figures

    def gpu(self) -> None:
        from bench import gpu
        from envace_demo.tasks import find_task

        if not gpu.available():
            self.details["gpu"] = None
            return
        task = find_task("bank", "check-balance")
        self.details["gpu"] = gpu.gpu_section(self.quick, (lambda b: _actor_prompt(b, task), task))


    def rehearsal(self) -> None:
        from bench import rehearsal
        from envace_demo.engine import EpisodeConfig
        from envace_demo.models.base import Sampling
        from envace_demo.settings import Settings
        from envace_demo.ui.inputs import PLAYGROUND_IMAGINED_READS, RunRequest

        from envace_demo import budget
        from envace_demo.models.speed import fitted_settings, measure_speed

        backend = self.backend()
        defaults = RunRequest(tools="", environment="", message="")  # the Playground's default controls
        # As the app does once the model is loaded: time it, and fit N, steps, tokens and the
        # limit to that speed (the Playground's controls then start at these values).
        settings, fitted, speed = fitted_settings(backend, Settings.from_env())
        speed = speed or measure_speed(backend)  # reported with the figures either way
        if fitted is not None:
            log(f"rehearsal: {budget.describe(fitted, speed)}")

        def config_for(mode: str, seed: int) -> EpisodeConfig:
            return EpisodeConfig.for_backend(
                backend,
                constrained=defaults.constrained,
                mode=mode,
                n=fitted.n if settings.target_seconds else defaults.n,
                sampling=Sampling.taken_from(
                    defaults, max_new_tokens=min(settings.max_new_tokens, defaults.max_new_tokens), seed=seed
                ),
                max_steps=min(settings.max_steps, defaults.max_steps),
                episode_seconds=settings.episode_seconds,
                think_chars=settings.think_chars,
                imagined_reads=PLAYGROUND_IMAGINED_READS,  # as the Playground runs it
            )

        load = round(os.getloadavg()[0], 2)
        figures, details = rehearsal.run(backend, self.quick, config_for, log)
        details["load_before"], details["load_after"] = load, round(os.getloadavg()[0], 2)
        details["config"] = {k: v for k, v in vars(config_for("parallel", 0)).items() if k != "redact"}
        details["config"]["sampling"] = vars(details["config"]["sampling"])
        details["speed"] = {"decode": round(speed.decode, 1), "prefill": round(speed.prefill, 1)}
        log(f"rehearsal: {figures}")
        self.figures.update(figures)
        self.details["rehearsal"] = details


    def heldout(self) -> None:
        from bench import heldout

        figures, details = heldout.section(self.quick, log)
        self.figures.update(figures)
        self.details["heldout"] = details


    def worlds(self) -> None:
        from bench import worlds

        figures, details = worlds.section(self.quick, log, self.cache_dir)
        self.figures.update(figures)
        self.details["worlds"] = details


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[1])
    parser.add_argument("--quick", action="store_true", help="fewer repeats and shorter runs (< 10 min on 2 cores)")
    parser.add_argument("--json", action="store_true", help="print the result object as JSON on stdout")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, help="run only these sections")
    parser.add_argument("--cache-dir", type=Path, default=ROOT / ".cache", help="the warm model cache")
    parser.add_argument("--out", type=Path, default=report.HERE, help="where results.json and RESULTS.md go")
    parser.add_argument("--threads", type=int, help="torch threads here and in the app (default: torch's choice)")
    parser.add_argument("--merge", action="store_true",
                        help="keep the figures of the sections not run from the existing results.json in --out")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    bench = Bench(args.quick, args.cache_dir, args.threads)
    if args.merge and (args.out / "results.json").exists():
        earlier = json.loads((args.out / "results.json").read_text(encoding="utf-8"))
        bench.figures = {k: earlier[k] for k in report.KEYS if earlier.get(k) is not None}
        bench.details = dict(earlier.get("details", {}))
        bench.notes = {k: v for k, v in earlier.get("notes", {}).items() if not v.startswith("not measured")}
        bench.details["merged_from"] = earlier.get("machine")  # the earlier sections' machine and load
    machine = machine_info()
    log(f"machine: {machine}")
    for name in args.only or SECTIONS:
        log(f"section {name} …")
        bench.notes.pop(name, None)  # a merged note spoke of the earlier run of this section
        try:
            getattr(bench, name)()
        except Exception as err:  # one broken section must not lose the others' figures
            traceback.print_exc(file=sys.stderr)
            bench.notes[name] = f"section failed: {type(err).__name__}: {err}"
    for key in report.KEYS:
        if bench.figures.get(key) is None and key not in bench.notes:
            bench.notes[key] = "not measured: its section was not run or failed (see the section's note)"
    machine["load_after"] = round(os.getloadavg()[0], 2)
    machine["seconds"] = round(time.perf_counter() - started, 1)
    result = report.build(bench.figures, bench.details, machine, args.quick, bench.notes)
    js, md = report.write(result, args.out)
    log(f"wrote {js} and {md} in {machine['seconds']:.0f} s")
    if args.json:
        print(json.dumps(result, ensure_ascii=False, default=str))
    else:
        print(report.markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
