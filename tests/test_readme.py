"""The README as a newcomer reads it: short, its Python API example runs as written, its
command lines parse, and every link (README and docs/) leads somewhere."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
from pathlib import Path

import pytest

from conftest import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_LINES = 300


def _readme() -> str:
    return README.read_text(encoding="utf-8")


def _blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", text, re.S | re.M)


def test_the_readme_is_at_most_300_lines():
    lines = _readme().splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines; move detail into docs/"


def test_the_readme_gives_the_make_commands_ci_runs():
    text = _readme()
    for target in ("demo", "app", "test"):
        assert f"make {target}" in text
        assert re.search(rf"^{target}:", (ROOT / "Makefile").read_text(), re.M), target
    assert "make test" in (ROOT / ".ci" / "run").read_text()  # CI runs the README's test command


def test_the_readme_command_lines_parse():
    from envace_demo.cli import build_parser

    prefix = ".venv/bin/python -m envace_demo "
    lines = [line for block in _blocks(_readme(), "bash") for line in block.splitlines()
             if line.startswith(prefix)]
    assert len(lines) >= 6
    for line in lines:
        argv = shlex.split(line[len(prefix):].split(" #")[0])
        if argv == ["--help"]:
            continue
        args = build_parser().parse_args(argv)
        assert args.command == argv[0] and callable(args.handler), line


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    return {_slug(m) for m in re.findall(r"^#+ (.+)$", text, re.M)}


def test_every_link_of_the_readme_and_the_docs_leads_somewhere():
    pages = [README, *sorted(DOCS.glob("*.md"))]
    assert len(pages) > 5
    for page in pages:
        text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+://", target):
                continue
            file, _, anchor = target.partition("#")
            path = (page.parent / file).resolve() if file else page
            assert path.exists(), f"{page.name}: {target}"
            if anchor and path.suffix == ".md":
                assert anchor in _anchors(path), f"{page.name}: {target}"


def test_the_readme_links_every_docs_page():
    text = _readme()
    for page in sorted(DOCS.glob("*.md")):
        assert f"(docs/{page.name})" in text, page.name


@pytest.mark.slow
def test_the_python_api_example_runs_to_a_finished_trajectory(monkeypatch):
    """The README's example, as written, with the embedded model (tens of seconds on CPU)."""
    import torch

    from envace_demo.record import VERSION, Trajectory

    examples = [b for b in _blocks(_readme(), "python") if "Episode(" in b]
    assert len(examples) == 1, "the README has one Python API example"
    monkeypatch.chdir(ROOT)  # as the README says: from the repository root
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # two shared cores: oversubscribed threads slow decoding badly
    out = io.StringIO()
    namespace: dict = {"__name__": "__readme__"}
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(examples[0], "README.md", "exec"), namespace)
    finally:
        torch.set_num_threads(threads)
    trajectory = namespace["trajectory"]
    assert isinstance(trajectory, Trajectory) and trajectory.ended
    assert trajectory.turns, "the committed run acted"
    printed = out.getvalue().strip().splitlines()
    assert printed and printed[-1].startswith(trajectory.ended)
    record = json.loads(json.dumps(trajectory.to_dict()))
    assert record["version"] == VERSION
    assert record["totals"]["real_calls"] + record["totals"]["held_calls"] >= 1  # it committed a call
