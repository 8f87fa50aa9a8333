"""A Hugging Face Space installs requirements.txt in one pip call with the packages the
gradio SDK adds; that call must resolve, for the Space's Python, with the pins we test.

Asks PyPI (pip's resolver, nothing installed), so it needs the package registry.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from conftest import ROOT

# What a gradio Space adds to requirements.txt in its one install command.
SPACE_EXTRAS = ['"gradio[oauth,mcp]=={sdk}"', '"uvicorn>=0.14.0"', '"websockets>=10.4"', "spaces"]
# ZeroGPU's supported versions (Python, torch).
ZEROGPU_PYTHON = {"3.10", "3.12"}
ZEROGPU_TORCH = {"2.8.0", "2.9.1", "2.10.0", "2.11.0"}


def front_matter() -> dict[str, str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.match(r"---\n(.*?)\n---\n", text, re.S)
    assert match, "README.md has no front matter"
    return {
        key.strip(): value.strip().strip('"')
        for key, _, value in (line.partition(":") for line in match.group(1).splitlines())
        if value.strip()
    }


def pins() -> dict[str, str]:
    found = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].split(";")[0].strip()
        if "==" in line:
            name, _, version = line.partition("==")
            found[name.strip().lower()] = version.strip()
    return found


def space_install_args() -> list[str]:
    sdk = front_matter()["sdk_version"]
    return ["-r", str(ROOT / "requirements.txt"), *(e.strip('"').format(sdk=sdk) for e in SPACE_EXTRAS)]


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
