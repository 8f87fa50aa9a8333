"""``eval_concurrency_speedup``: the same ``eval`` run against ``transformers serve`` at
``--concurrency 1`` and at ``--concurrency 4``; the figure is time(1) / time(4).

    python -m bench.eval_speed [--tokens 32] [--profile DIR] [--continuous-batching]

The run: the embedded model served on 127.0.0.1, modes none and parallel (N=2), the
first 8 records of bfcl_multiple.jsonl, seed 0. Beside the wall times it records the
CPU seconds the server and the client (this process) used, so the figure can be read
against the two cores; ``--profile`` samples the server with py-spy during the
concurrent run (where its CPU time goes, by thread).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT.parent / "shared" / "data" / "bfcl" / "bfcl_multiple.jsonl"
_TICK = os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@contextlib.contextmanager
def served_model(cache_dir: Path, extra_args: tuple[str, ...] = (), threads: int = 1):
    """``transformers serve`` of the embedded model on a free port; yields (url, process).
    ``threads``: the server's torch/OpenMP threads. One by default: on 2 shared cores an
    oversubscribed server decoded several times slower, and the client needs some CPU too."""
    from envace_demo.models.embedded import ensure_embedded_model

    exe = Path(sys.executable).parent / "transformers"
    folder = ensure_embedded_model(cache_dir)
    port = _free_port()
    log = tempfile.NamedTemporaryFile("w+", prefix="envace-serve-", suffix=".log", delete=False)
    proc = subprocess.Popen(
        [str(exe), "serve", str(folder), "--host", "127.0.0.1", "--port", str(port), "--device", "cpu", *extra_args],
        stdout=log, stderr=subprocess.STDOUT,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)},
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if json.loads(r.read()).get("status") == "ok":
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("transformers serve did not start: " + Path(log.name).read_text()[-1500:])
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1", proc
    finally:
        stop_server(proc)
        os.unlink(log.name)


def stop_server(proc: subprocess.Popen) -> None:
    """SIGTERM, wait, then SIGKILL: a server busy with a stream may ignore TERM."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def timed_eval(url: str, server_pid: int, concurrency: int, tokens: int, limit: int = 8) -> dict:
    """One ``eval`` run (in this process, as the command runs it); wall and CPU seconds."""
    from envace_demo.cli import main

    with tempfile.TemporaryDirectory(prefix="envace-eval-speed-") as out:
        argv = ["eval", "--tasks", str(TASKS), "--limit", str(limit), "--modes", "none,parallel", "--n", "2",
                "--seeds", "1", "--max-new-tokens", str(tokens), "--max-steps", "1",
                "--concurrency", str(concurrency), "--backend", "openai", "--base-url", url,
                "--out", out, "--json", "--no-progress"]
        server0, client0, started = _cpu_seconds(server_pid), _own_cpu_seconds(), time.perf_counter()
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            code = main(argv)
        wall = time.perf_counter() - started
        if code != 0:
            raise RuntimeError(f"eval exited {code}")
        report = json.loads(stdout.getvalue())
    episodes = report["tasks"]
    return {
        "concurrency": concurrency,
        "seconds": round(wall, 2),
        "episodes": len(episodes),
        "errors": sum(1 for e in episodes if e["error"]),
        "tokens": sum(e["tokens"] for e in episodes),
        "server_cpu_s": round(_cpu_seconds(server_pid) - server0, 2),
        "client_cpu_s": round(_own_cpu_seconds() - client0, 2),
    }


def _thread_kind(stack: str) -> str:
    if "generate" in stack or "forward" in stack:
        return "model.generate on the inference thread (forward passes)"
    if "uvicorn" in stack or "asyncio" in stack or "starlette" in stack:
        return "HTTP server and event loop (request parsing, streaming chunks)"
    if "apply_chat_template" in stack or "tokeniz" in stack:
        return "chat template and tokenizer"
    return "other"


def profile_summary(raw: Path) -> dict[str, float]:
    """Share of the server's busy samples by kind of work (py-spy ``--format raw``)."""
    kinds: Counter = Counter()
    for line in raw.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            kinds[_thread_kind(stack)] += int(count)
    total = sum(kinds.values()) or 1
    return {k: round(v / total, 3) for k, v in kinds.most_common()}


def eval_speedup(cache_dir: Path, tokens: int = 32, profile_dir: Path | None = None,
                 continuous_batching: bool = False, threads: int = 1) -> dict:
    """Both runs against one server (a warm-up request first, so neither pays a cold start)."""
    extra = ("--continuous-batching",) if continuous_batching else ()
    with served_model(cache_dir, extra, threads) as (url, proc):
        from envace_demo.models.base import Sampling
        from envace_demo.models.openai_backend import OpenAIBackend

        warm = OpenAIBackend(url)
        warm.generate(warm.prompt([{"role": "user", "content": "hello"}]), Sampling(max_new_tokens=4, seed=0))
        one = timed_eval(url, proc.pid, 1, tokens)
        spy = None
        spy_exe = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
        if profile_dir is not None and spy_exe:
            profile_dir.mkdir(parents=True, exist_ok=True)
            raw = profile_dir / f"serve-c4{'-cb' if continuous_batching else ''}.txt"
            # --nonblocking: sampling must not pause the server it measures.
            spy = subprocess.Popen([spy_exe, "record", "--pid", str(proc.pid), "--format", "raw", "--nonblocking",
                                    "--rate", "50", "--output", str(raw)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        four = timed_eval(url, proc.pid, 4, tokens)
        profile = None
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(30)
            profile = profile_summary(raw) if raw.exists() else None
    cores = os.cpu_count() or 1
    for run in (one, four):
        run["server_cores_busy"] = round(run["server_cpu_s"] / run["seconds"], 2)
        run["tok_s"] = round(run["tokens"] / run["seconds"], 2)
    return {
        "speedup": round(one["seconds"] / four["seconds"], 3),
        "runs": [one, four],
        "cores": cores,
        "tokens": tokens,
        "continuous_batching": continuous_batching,
        "server_threads": threads,
        "profile_c4": profile,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.eval_speed", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=32, help="max new tokens per generation")
    parser.add_argument("--cache-dir", type=Path, default=ROOT / ".cache")
    parser.add_argument("--profile", type=Path, help="write the server's py-spy samples here")
    parser.add_argument("--continuous-batching", action="store_true", help="serve with --continuous-batching")
    parser.add_argument("--server-threads", type=int, default=1, help="the server's torch threads")
    args = parser.parse_args(argv)
    figures = eval_speedup(args.cache_dir, args.tokens, args.profile, args.continuous_batching, args.server_threads)
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
