"""Training task sets shipped with the package.

``data/bank_drills.jsonl``: 24 single-call tasks on the ``bank`` environment, six
families (balance, history, deposit, withdraw, freeze, transfer) of four tasks
each; per family three are for training and one, with other accounts or amounts,
is held out. Checks are the environment's state after the call, or the call
itself for read-only tools. The held-out tasks resemble the training ones on
purpose: at demo scale (a 135M model, minutes of CPU) that is what training can
be expected to move.
"""

from __future__ import annotations

from pathlib import Path

from envace_demo.errors import TaskError
from envace_demo.policy import DEFAULT_POLICY, InputPolicy
from envace_demo.tasks import Task, load_task_file

DATA_DIR = Path(__file__).resolve().parent / "data"


def drill_file(env: str) -> Path | None:
    path = DATA_DIR / f"{env}_drills.jsonl"
    return path if path.is_file() else None


def drill_tasks(env: str) -> list[Task]:
    """The drill tasks of ``env`` (splits ``train`` and ``heldout``)."""
    path = drill_file(env)
    if path is None:
        available = sorted(p.name.removesuffix("_drills.jsonl") for p in DATA_DIR.glob("*_drills.jsonl"))
        raise TaskError(
            f"no drill tasks for environment {env!r}; available: {', '.join(available) or 'none'}"
        )
    return load_task_file(path)


def task_set(
    env: str | None = None,
    drills: bool = False,
    tasks_file: str | Path | None = None,
    tools: object = None,
    policy: InputPolicy = DEFAULT_POLICY,
) -> list[Task]:
    """Training tasks from one source, as the CLI and the Fine-tune tab offer them:
    the drills of ``env``; the example tasks of ``env``; a JSONL of tasks over ``env``;
    or a JSONL of tasks over ``tools`` (parsed JSON, any dialect ``load_tools`` reads).
    Records that name their own environment or tools keep them."""
    from envace_demo.bfcl_multi import is_bfcl_multi_turn
    from envace_demo.schemas import load_tools
    from envace_demo.tasks import env_tasks, read_jsonl, task_from_record

    if drills:
        if not env or tasks_file:
            raise TaskError("drills go with an environment and without a task file")
        return drill_tasks(env)
    if env and not tasks_file:
        return env_tasks(env)
    if not tasks_file:
        raise TaskError("tools need a task file: a JSONL of tasks with checks")
    extra: dict = {"env": env}
    if tools is not None:
        load_tools(tools, policy)  # located schema errors now, not once per task
        extra = {"tools": tools}
    tasks = []
    for where, record in read_jsonl(Path(tasks_file), policy=policy):
        if isinstance(record, dict) and not any(record.get(k) for k in ("env", "tools", "function")):
            record = {**record, **extra}
        task = task_from_record(record, where, policy=policy)
        if is_bfcl_multi_turn(task):  # the benchmark: never trained on
            raise TaskError(f"{where}: a BFCL multi-turn entry ({task.name}); they are the benchmark, not training data")
        tasks.append(task)
    return tasks


def split_tasks(tasks: list[Task]) -> tuple[list[Task], list[Task]]:
    """(training tasks, held-out tasks): both must be there, or a TaskError says which is missing."""
    train = [t for t in tasks if t.split != "heldout"]
    heldout = [t for t in tasks if t.split == "heldout"]
    if not heldout:
        raise TaskError('no held-out tasks: mark the evaluation tasks with "split": "heldout"')
    if not train:
        raise TaskError('no training tasks: every task is marked "split": "heldout"')
    return train, heldout
