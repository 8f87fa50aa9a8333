"""Where the time goes: the benchmark's workloads sampled by py-spy, summed by kind of work.

    python -m bench.profile parallel --n 4     # N rehearsals of bank/check-balance (bench's workload)
    python -m bench.profile parallel --n 1
    python -m bench.profile grpo               # one GRPO step, after a warm-up step
    python -m bench.profile summarize FILE...  # py-spy raw files recorded earlier

Generation runs on a worker thread and mostly in native code (MKL, torch), so a
Python-only profiler of the main thread sees nothing; py-spy samples every thread,
native frames included. Each sample inside the workload is put in the first kind
whose marker its stack holds (the order matters: attention calls GEMMs too).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# (kind, markers in the stack); the first match wins.
KINDS = (
    ("KV cache growth (torch.cat per step)", ("THPVariable_cat", "DynamicLayer.update")),
    ("attention (sdpa)", ("scaled_dot_product_attention", "sdpa_attention_forward")),
    ("backward pass", ("autograd::engine", "run_backward", "_engine_run_backward")),
    ("linear layers (GEMM)", ("THPVariable_linear", "Linear.forward", "lora")),
    ("grammar masks (xgrammar)", ("xgrammar",)),
    ("sampling (top-k, top-p)", ("THPVariable_topk", "Warper")),
    ("Python garbage collection", ("gc_collect_main",)),
    ("other torch ops (norms, rotary, embedding)", ("THPVariable", "torch::autograd")),
)
# Stacks of the workload's threads: generation runs on worker threads whose stacks do
# not hold the caller's frames, so the markers are the project's own modules.
WORKLOAD_MARKERS = ("envace_demo/engine/", "envace_demo/models/", "envace_demo/train/")


def summarize(raw: Path) -> tuple[int, Counter]:
    """(samples inside the workload, samples per kind) of a py-spy ``--format raw`` file."""
    kinds: Counter = Counter()
    total = 0
    for line in raw.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit() or "load_backend" in stack or not any(m in stack for m in WORKLOAD_MARKERS):
            continue
        n = int(count)
        total += n
        kind = next((name for name, markers in KINDS if any(m in stack for m in markers)), None)
        kinds[kind or "the rest (Python: generate loop, engine, trainer)"] += n
    return total, kinds


def report(raw: Path) -> str:
    total, kinds = summarize(raw)
    lines = [f"{raw.name}: {total} samples inside the workload"]
    lines += [f"  {100 * n / max(total, 1):5.1f}%  {n:6d}  {kind}" for kind, n in kinds.most_common()]
    return "\n".join(lines)


def _work(workload: str, n: int, cache_dir: Path) -> None:
    """The workload itself (run by py-spy in a child process)."""
    from envace_demo.models.loader import load_backend
    from envace_demo.models.transformers_backend import CPU_AUTO_DTYPE

    backend = load_backend("embedded", cache_dir=cache_dir, dtype=CPU_AUTO_DTYPE)
    if workload == "parallel":
        from bench.parallel import time_rehearsals
        from envace_demo.tasks import find_task

        task = find_task("bank", "check-balance")
        time_rehearsals(backend, task, 1, 999, 1, 8, True)  # warm-up: grammar compilation
        print(time_rehearsals(backend, task, n, 0, 2, 96, True), flush=True)
        return
    from bench.training import step_config
    from envace_demo.tasks import env_tasks
    from envace_demo.train.events import StepFinished
    from envace_demo.train.trainer import Trainer

    with tempfile.TemporaryDirectory(prefix="envace-profile-grpo-") as out:
        trainer = Trainer(backend, env_tasks("bank"), [], step_config(backend, steps=2), Path(out), copy_model=True)
        for event in trainer.run():
            if isinstance(event, StepFinished):
                print({k: v for k, v in event.metrics.items() if "seconds" in k}, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=["parallel", "grpo", "summarize", "_work"])
    parser.add_argument("files", nargs="*", type=Path, help="summarize: py-spy raw files")
    parser.add_argument("--n", type=int, default=4, help="rehearsals of the parallel workload")
    parser.add_argument("--rate", type=int, default=40, help="py-spy samples per second")
    parser.add_argument("--cache-dir", type=Path, default=ROOT / ".cache")
    parser.add_argument("--raw", type=Path, help="keep py-spy's raw samples here")
    parser.add_argument("--kind", default="parallel", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.workload == "summarize":
        print("\n".join(report(f) for f in args.files))
        return 0
    if args.workload == "_work":
        _work(args.kind, args.n, args.cache_dir)
        return 0
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        print("py-spy is not installed: pip install -r requirements-dev.txt", file=sys.stderr)
        return 2
    raw = args.raw or Path(tempfile.mkdtemp(prefix="envace-profile-")) / f"{args.workload}.raw"
    child = [sys.executable, "-m", "bench.profile", "_work", "--kind", args.workload, "--n", str(args.n),
             "--cache-dir", str(args.cache_dir)]
    # The first sampled seconds load the model: only stacks inside _work's workload count.
    cmd = [spy, "record", "--native", "-r", str(args.rate), "-f", "raw", "-o", str(raw), "--", *child]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    print(done.stdout.strip())
    if done.returncode != 0:
        print(done.stderr[-2000:], file=sys.stderr)
        return done.returncode
    print(report(raw))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
