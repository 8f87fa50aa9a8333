"""``python app.py`` in a subprocess on a free loopback port: the one launcher that the load
benchmark (``bench.load``) and the tests (``helpers.LaunchedApp``) share.

``CHEAP_ENV`` is the cheap configuration it runs with unless told otherwise: the embedded
model on CPU, one OpenMP thread, one actor turn, 160 new tokens (a rehearser that states its
facts first needs about 150 for an account's record), nothing fetched online.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOOPBACK = "127.0.0.1"
TOKENS = 160
CHEAP_ENV = {
    "ENVACE_MODEL": "embedded",
    "ENVACE_DEVICE": "cpu",
    "ENVACE_MAX_NEW_TOKENS": str(TOKENS),
    "ENVACE_MAX_STEPS": "1",
    # One thread: on a small shared CPU, two OpenMP threads fighting other work made each
    # decoding step many times slower.
    "OMP_NUM_THREADS": "1",
    "ENVACE_CACHE_DIR": str(ROOT / ".cache"),
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "GRADIO_ANALYTICS_ENABLED": "False",
}
POLL_S = 0.25


def free_port() -> int:
    """A TCP port free on the loopback address now."""
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


class AppProcess:
    """``python app.py`` on a free loopback port, its output in ``log_path``.

    ``env``: variables over ``CHEAP_ENV``; ``drop``: variables of this process's environment
    the app must not see. ``served_after`` and ``model_ready_after``: seconds from launch,
    once waited for.
    """

    def __init__(self, log_path: Path, env: dict[str, str] | None = None, drop: Iterable[str] = ("SPACE_ID",)):
        self.port = free_port()
        self.url = f"http://{LOOPBACK}:{self.port}/"
        self.log_path = Path(log_path)
        full = {
            **os.environ,
            **CHEAP_ENV,
            "GRADIO_SERVER_NAME": LOOPBACK,
            "GRADIO_SERVER_PORT": str(self.port),
            **(env or {}),
        }
        for var in drop:
            full.pop(var, None)
        self.served_after: float | None = None
        self.model_ready_after: float | None = None
        self._log = open(self.log_path, "w")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "app.py"],
            cwd=ROOT,
            env=full,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def __enter__(self) -> AppProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def _check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"app.py exited with {self.proc.returncode}:\n{self.log()[-3000:]}")

    def wait_served(self, timeout: float = 240) -> float:
        """Seconds from launch until the page answers 200."""
        deadline = self.started + timeout
        while self.served_after is None:
            if time.monotonic() >= deadline:
                raise RuntimeError(f"app.py did not serve within {timeout} s:\n{self.log()[-3000:]}")
            self._check_alive()
            try:
                with urllib.request.urlopen(self.url, timeout=2) as response:
                    if response.status == 200:
                        self.served_after = time.monotonic() - self.started
                        break
            except OSError:
                pass
            time.sleep(POLL_S)
        return self.served_after

    def wait_model_ready(self, timeout: float = 300) -> float:
        """Seconds from launch until the app logged that the model is ready."""
        deadline = self.started + timeout
        while self.model_ready_after is None:
            log = self.log()
            if "model ready:" in log:
                self.model_ready_after = time.monotonic() - self.started
                break
            if "model failed to load" in log:
                raise RuntimeError(log[-3000:])
            if time.monotonic() >= deadline:
                raise RuntimeError(f"the model was not ready within {timeout} s:\n{log[-3000:]}")
            self._check_alive()
            time.sleep(POLL_S)
        return self.model_ready_after

    def wait_ready(self, timeout: float = 300) -> float:
        """Seconds from launch until the page serves and the model is loaded."""
        return max(self.wait_served(timeout), self.wait_model_ready(timeout))

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()
