"""Generated training tasks over the example environments' own entities, each with a
scripted solution run against the real environment.

For ``bank``, ``files`` and ``library`` the modules of this package (``bank.py``,
``files.py``, ``library.py``) write requests about the environment's accounts and
amounts, paths and contents, books and patrons. Each task is solved by a short script of
real calls (one per actor turn, as the embedded model acts)
and an answer written from the real results; its check (the task format of
``envace_demo.tasks``) is read from the final state and the results, and holds for the
script by construction (``tests/test_train_generate.py`` runs every one). The example
tasks marked ``"split": "heldout"`` stay apart: no generated task repeats a held-out
task's request or the calls its check asks for (``overlaps_heldout``).

``ScriptedTask`` keeps what the warm start needs: the task, and per turn the thought,
the call, the context the rehearser is given for it (the real reads its environment names
for it, ``Environment.context_reads``, made just before the call as the engine makes
them) and its real response, then the final thought and answer.

The requests of every family stay the same in every world (``worlds.py``); what a world
decides, the script reads from the real responses: a withdrawal over the balance, money
moving on a frozen account, a file that exists already or a directory that does not.
A family that makes a mistake on purpose marks it (``ScriptedTask.rehearser_only``):
its rows are then the rehearser's alone, so the actor never learns the mistake.

``script.py`` holds the machinery a writer uses (``ScriptedTask``, the script run as it
is written), ``heldout.py`` what keeps the generated tasks apart from the held-out ones;
``generated_tasks`` and ``training_tasks`` stay here, so ``training_tasks`` finds
``generated_tasks`` as this package has it.
"""

from __future__ import annotations

from typing import Any

from envace_demo.envs.registry import create
from envace_demo.tasks import task_from_record
from envace_demo.train.generate import bank, files, library
from envace_demo.train.generate.heldout import heldout_tasks, overlaps_heldout
from envace_demo.train.generate.script import Script, ScriptedStep, ScriptedTask

__all__ = [
    "GENERATED_ENVS",
    "ScriptedStep",
    "ScriptedTask",
    "generated_tasks",
    "heldout_tasks",
    "overlaps_heldout",
    "training_tasks",
]

GENERATED_ENVS = ("bank", "files", "library")

_WRITERS = {"bank": bank.write, "files": files.write, "library": library.write}
_READ_TOOLS = {"bank": bank.READ_TOOLS, "files": files.READ_TOOLS, "library": library.READ_TOOLS}


def generated_tasks(env: str, world: int | None = None, phrasing: int | None = None) -> list[ScriptedTask]:
    """The generated tasks of ``env`` with their scripts (split ``train``), each run on a
    fresh environment; ``world``: in that varied world (``worlds.py``), not the seeded one
    (the scripts' answers then follow its values; checks are kept for the seeded world).
    ``phrasing``: which wording of each request (default: the world's number, so each
    world words its requests its own way)."""
    if env not in _WRITERS:
        raise ValueError(f"no generated tasks for environment {env!r}; available: {', '.join(GENERATED_ENVS)}")
    tools = {env: create(env).tools()}
    scripts: list[Script] = []

    def add(name: str, prompt: str) -> Script:
        environment = create(env)
        if world is not None:
            from envace_demo.train.worlds import varied

            environment.vary_state(varied(env, world))
        script = Script(env, environment, f"gen-{env}-{name}", prompt)
        scripts.append(script)
        return script

    turn = (world or 0) if phrasing is None else phrasing

    def say(i: int, phrasings: tuple[str, ...], **values: Any) -> str:
        """One of a request's phrasings, another in each varied world: the actor meets
        each request in several wordings for the same number of rows."""
        return phrasings[(i + turn) % len(phrasings)].format(**values)

    _WRITERS[env](add, say)
    out = []
    for s in scripts:
        record = {"name": s.name, "prompt": s.prompt, "env": env, "check": s.check, "split": "train"}
        task = task_from_record(record, f"generated:{s.name}", tools)
        reads_only = all(step.call.name in _READ_TOOLS[env] for step in s.steps)
        out.append(ScriptedTask(task, s.steps, s.answer, s.answer_thought, reads_only, s.rehearser_only))
    return out


def training_tasks(
    envs: tuple[str, ...] = GENERATED_ENVS, world: int | None = None, phrasing: int | None = None
) -> list[ScriptedTask]:
    """Every generated task of ``envs`` that stays apart from the held-out ones (in varied
    ``world`` and with ``phrasing``, where given)."""
    out = []
    for env in envs:
        held = heldout_tasks(env)
        out.extend(t for t in generated_tasks(env, world, phrasing) if overlaps_heldout(t, held) is None)
    return out
