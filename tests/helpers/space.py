"""A Hugging Face Space: the README's front matter, the pinned requirements, and the one
install command a gradio Space runs."""

from __future__ import annotations

import re

from helpers.paths import ROOT

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
