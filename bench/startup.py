"""``python app.py`` from launch: when the page answers, when the model is ready, memory.

The app runs as a child process on a free loopback port. The page counts as served
at the first HTTP 200 on ``/``; the model as ready when the app logs "model ready"
(``ui/holder.py``). A cold start gets an empty ``ENVACE_CACHE_DIR``, so the embedded
model is converted first, as on a machine's first run.

Memory: the resident set of the app process (and any children) once idle with the
model loaded, and its peak while it runs one ``parallel`` N=4 episode through its
``/run`` API (sampled every 50 ms).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
READY = re.compile(r"model ready")
FAILED = re.compile(r"model failed to load")


@dataclass
class Startup:
    page_served_s: float | None
    model_ready_s: float | None
    error: str | None = None
    idle_rss_mb: float | None = None
    run_peak_rss_mb: float | None = None
    run_seconds: float | None = None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _page_answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def rss_mb(pid: int) -> float:
    """Resident set of ``pid`` and its children, in MiB."""
    import psutil

    proc = psutil.Process(pid)
    total = proc.memory_info().rss
    for child in proc.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.Error:
            pass
    return total / 2**20


def _parallel_run(url: str, pid: int, n: int, max_new_tokens: int) -> tuple[float, float]:
    """(peak RSS MiB, seconds) of one parallel episode through the app's /run API."""
    from gradio_client import Client

    tools = (ROOT / "examples" / "bank" / "tools.json").read_text(encoding="utf-8")
    client = Client(url, verbose=False)
    peak = [rss_mb(pid)]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss_mb(pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    try:
        client.predict(tools, "bank", "What is the current balance of account ACC-1003?", mode="parallel", n=n,
                       seed=0, max_new_tokens=max_new_tokens, max_steps=2, api_name="/run")
    finally:
        done.set()
        sampler.join()
    return peak[0], time.perf_counter() - start


def measure_startup(cache_dir: Path, timeout: float = 300.0, memory_run: bool = False, n: int = 4,
                    max_new_tokens: int = 96, threads: int | None = None) -> Startup:
    """Launch ``python app.py`` and time it; with ``memory_run``, also measure its memory."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    env = {
        **os.environ,
        "GRADIO_SERVER_NAME": "127.0.0.1",
        "GRADIO_SERVER_PORT": str(port),
        "GRADIO_ANALYTICS_ENABLED": "False",
        "ENVACE_CACHE_DIR": str(cache_dir),
        "ENVACE_MODEL": "embedded",
        "PYTHONUNBUFFERED": "1",
    }
    if threads:
        env["ENVACE_THREADS"] = str(threads)
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    marks: dict[str, float] = {}
    log: list[str] = []

    def read_log() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            log.append(line)
            if READY.search(line):
                marks.setdefault("ready", time.perf_counter() - start)
            elif FAILED.search(line):
                marks.setdefault("failed", time.perf_counter() - start)

    reader = threading.Thread(target=read_log, daemon=True)
    reader.start()
    result = Startup(None, None)
    try:
        while time.perf_counter() - start < timeout:
            if proc.poll() is not None:
                result.error = f"app.py exited with {proc.returncode}: {''.join(log[-5:]).strip()}"
                return result
            if result.page_served_s is None and _page_answers(url):
                result.page_served_s = time.perf_counter() - start
            if "failed" in marks:
                result.error = "the model failed to load: " + "".join(log[-3:]).strip()
                return result
            if result.page_served_s is not None and "ready" in marks:
                break
            time.sleep(0.05)
        else:
            result.error = f"not ready within {timeout:.0f} s"
            return result
        result.model_ready_s = marks["ready"]
        if memory_run:
            time.sleep(2.0)  # settle: the page's first requests, lazy imports
            result.idle_rss_mb = round(rss_mb(proc.pid), 1)
            peak, seconds = _parallel_run(url, proc.pid, n, max_new_tokens)
            result.run_peak_rss_mb, result.run_seconds = round(peak, 1), round(seconds, 2)
        return result
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
