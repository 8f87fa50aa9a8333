"""A Hugging Face Space installs requirements.txt in one pip call with the packages the
gradio SDK adds; that call must resolve, for the Space's Python, with the pins we test.

Asks PyPI (pip's resolver, nothing installed), so it needs the package registry.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT
from helpers import ZEROGPU_PYTHON, ZEROGPU_TORCH, front_matter, pins, space_install_args

def test_front_matter_matches_the_pins():
    meta, pinned = front_matter(), pins()
    assert meta["sdk"] == "gradio" and meta["app_file"] == "app.py"
    assert meta["sdk_version"] == pinned["gradio"]
    assert meta["python_version"] in ZEROGPU_PYTHON
    assert pinned["torch"] in ZEROGPU_TORCH


@pytest.mark.slow
def test_the_space_install_resolves(tmp_path):
    """pip's own resolver over exactly the Space's install, for the front matter's Python
    on this platform (binary wheels only, as a Space's build takes them)."""
    from packaging.tags import platform_tags

    python = front_matter()["python_version"]
    abi = "cp" + python.replace(".", "")
    platforms = [arg for tag in platform_tags() for arg in ("--platform", tag)]
    report = tmp_path / "report.json"
    cmd = [
        sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
        "--report", str(report), "--target", str(tmp_path / "target"),
        "--python-version", python, "--implementation", "cp", "--abi", abi, "--abi", "abi3", "--abi", "none",
        *platforms, "--only-binary=:all:", *space_install_args(),
    ]  # fmt: skip
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-4000:]
    chosen = {
        item["metadata"]["name"].lower().replace("_", "-"): item["metadata"]
        for item in json.loads(report.read_text())["install"]
    }
    for name, version in pins().items():
        assert chosen[name.replace("_", "-")]["version"] == version, name
    # The torch a Space gets must be a CUDA 12 build: a CUDA 13 one needs a driver >= 580,
    # and on an older one a GPU Space would find no usable GPU.
    torch_deps = chosen["torch"].get("requires_dist", [])
    assert any(dep.startswith("nvidia-cuda-runtime-cu12") for dep in torch_deps), torch_deps
    assert not any("cu13" in dep or "cuda-toolkit" in dep for dep in torch_deps), torch_deps
    assert "spaces" in chosen and "mcp" in chosen
