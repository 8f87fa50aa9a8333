"""The ``demo-cpu`` recipe: the embedded model trained to act and rehearse on the three
example environments, on two CPU cores.

    python -m envace_demo train --recipe demo-cpu --out DIR

Stages, each writing its curves into ``DIR``:
  1. tasks: generated requests over each environment's own entities with their checks
     (``generate/``), apart from the example tasks held out; ``DIR/tasks.jsonl``;
  2. warm start: supervised LoRA on real transitions in the exact prompts
     (``warmstart.py``, ``sft.py``); ``DIR/sft_metrics.jsonl``, one row per step with the
     role's loss;
  3. role-wise GRPO on the same tasks, continuing the same adapter (``trainer.py``);
     ``DIR/metrics.jsonl`` (per-role rewards and losses);
then ``DIR/adapter/`` (the LoRA adapter of both stages) and ``DIR/summary.json``.

Before it starts, ``estimate`` times a forward pass on this machine now and prints what
the whole recipe should take at that speed.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from envace_demo.record import error_code, is_error
from envace_demo.train.config import TrainConfig
from envace_demo.train.generate import GENERATED_ENVS, ScriptedTask, training_tasks

TASKS_FILE = "tasks.jsonl"
SFT_METRICS_FILE = "sft_metrics.jsonl"
RECIPE_FILE = "recipe.json"
WARM_START_DIR = "adapter-warm-start"


def _grpo() -> TrainConfig:
    # Rehearsals write the real JSON now: 64 new tokens would cut most of them. A learning
    # rate well below the drills' 3e-3: this stage refines a warm-started adapter.
    # Two turns: a call and the answer, so that a rollout can succeed (one turn never does).
    return TrainConfig.cpu_recipe(steps=4, max_new_tokens=160, max_turns=2, lora_rank=16, lr=5e-4, eval_rehearsals=0)


@dataclass(frozen=True)
class DemoRecipe:
    envs: tuple[str, ...] = GENERATED_ENVS
    tasks_per_env: int | None = None  # None: all generated tasks
    sft_epochs: int = 3
    # The rehearser learns the environments' contents (balances, files, the catalog) from
    # fewer rows than the actor has: it sees them in more epochs.
    rehearser_epochs: int = 5
    sft_minutes: float | None = None  # time box of the warm start (None: all its epochs)
    sft_lr: float = 1e-3
    sft_final_lr: float = 0.1  # linear decay to a tenth by the last step
    sft_micro_batch: int = 8
    sft_bf16: bool | None = None  # autocast to bfloat16; None: where the CPU computes it natively
    thoughts: bool = False  # targets with the empty reasoning block, as served on a slow CPU
    memory_every: int = 3  # the actor's rows with a rehearsal memory for every 3rd task
    # Actor rows from this many varied worlds besides the seeded one (worlds.py): answers
    # taken from the results in front of the actor, not from one world learnt by heart.
    actor_variants: int = 2
    # The rehearser's rows in this many wordings of the requests, all in the seeded world:
    # the same facts in other conversations (the held-out requests are worded apart).
    rehearser_phrasings: int = 1
    # The rehearser's rows again in this many varied worlds (``worlds.TRAIN_WORLDS``, never
    # an evaluation world): only its calls with context reads (writes), each with the real
    # state it depends on last in its few-shot, so that an outcome comes from the state
    # shown and not from the seeded world learnt by heart. ``world_tasks``: that many tasks
    # a world (spread over the environments, drawn anew in each world; None: all).
    rehearser_worlds: int = 0
    world_tasks: int | None = 15
    # The seeded world's rehearser rows: "all", "context": the committed rows of calls with
    # context reads alone (a stage that teaches the context and leaves the rest as the
    # stage before learnt it), or "none" (a stage of varied worlds or drills alone).
    seeded_rows: str = "all"
    # In each varied world, half of its tasks drawn among those whose outcome there differs
    # from the seeded world's (a refusal here, a success there): the rows where the seeded
    # world learnt by heart is wrong and only the context is right.
    world_contrast: bool = False
    # The varied worlds' rehearser rows drawn evenly over outcomes: at most this many of
    # each (tool, success or error code), from all the worlds' tasks (None: as drawn by
    # ``world_tasks``). Successes outnumber most refusals several times over; evenly drawn,
    # the rows teach that the state shown decides, not which outcome is usual.
    world_rows_per_outcome: int | None = None
    # Successes drawn up to this many a tool instead (None: as many as each error code). Drawn
    # as evenly as the errors, successes were one row in four of a transfer's, and the
    # rehearser foresaw refusals where the bank took the call (a $300 transfer within a $2,000
    # limit rehearsed as DAILY_LIMIT_EXCEEDED): the state decides, but most calls go through.
    success_rows_per_outcome: int | None = None
    # Each setting of a call's boolean arguments drawn as an outcome of its own (``overwrite``
    # true or not): drawn by outcome alone, a write's successes were nearly all new files, and
    # the rehearser foresaw ALREADY_EXISTS for a write with overwrite true (0.97 sure).
    outcome_flags: bool = False
    # The weight of a rehearser target's outcome tokens in the loss (``sft.token_weights``).
    outcome_weight: float = 1.0
    # The weight of a reasoning target's deciding facts (``sft.token_weights``): 0 where the
    # engine states them at run time (``EpisodeConfig.state_facts``) and only the step from
    # them to the outcome and the response is learnt.
    facts_weight: float = 1.0
    # A rehearser target reasons from the deciding facts its context shows, then says the
    # outcome (``facts.py``); served with a reasoning bound for the rehearser
    # (``EpisodeConfig.rehearser_think_chars``).
    rehearser_facts: bool = False
    # Brief rehearser rows (``warmstart.brief_row``) of every call with context reads in this
    # many varied worlds (``worlds.TRAIN_WORLDS``): the step from the facts shown to the
    # outcome, drilled at a fraction of a full row's cost. Needs ``rehearser_facts``;
    # ``world_rows_per_outcome`` caps them as it caps the varied worlds' rows.
    drill_worlds: int = 0
    # A varied world's actor rows with a memory show the rehearsal of the world before it:
    # a rehearsal that guessed other values, beside the real results the answer must follow.
    memory_elsewhere: bool = True
    # The actor's rows of tasks with a mistaken call (the recovery after a failed write:
    # generate/files.py). Off, those tasks teach the rehearser alone: an actor taught them
    # learnt that a failure is followed by another call, not which, and stopped short of
    # the second call of other tasks (bench/RESULTS.md, actor stages a13 to a15).
    actor_recovery: bool = True
    # Continue this saved adapter instead of a fresh one (a recipe stage run again).
    from_adapter: str | None = None
    # The roles whose rows are trained. One role alone makes an adapter for that role only
    # (the method's "noshare" variant: a rehearser with weights of its own, served beside
    # the actor's adapter); its stage has no GRPO, whose episodes need both roles.
    roles: tuple[str, ...] = ("actor", "rehearser")
    lora_rank: int = 16
    lora_layers: int | None = 8  # LoRA on the last 8 of 30 layers: backward stops there
    grpo: TrainConfig = field(default_factory=_grpo)
    probe_rows: int = 2  # greedy rehearsals checked after the warm start (logged)
    seed: int = 0

    def to_dict(self) -> dict:
        return {**asdict(self), "grpo": self.grpo.to_dict()}


def smoke_recipe() -> DemoRecipe:
    """Two steps of each stage on a handful of tasks (the CI run)."""
    grpo = replace(_grpo(), steps=2, group_size=2, max_new_tokens=24, max_turns=1)
    return DemoRecipe(
        tasks_per_env=1, sft_epochs=1, rehearser_epochs=1, sft_micro_batch=4, memory_every=0, grpo=grpo,
        envs=("bank",), probe_rows=0,
    )


def recipe_tasks(recipe: DemoRecipe, world: int | None = None, phrasing: int | None = None) -> list[ScriptedTask]:
    """The recipe's tasks (in varied ``world``, worded by ``phrasing``, where given); with
    ``tasks_per_env``, that many per environment, evenly spread over its list (so every
    family of requests keeps some)."""
    out = []
    for env in recipe.envs:
        mine = training_tasks((env,), world, phrasing)
        n = recipe.tasks_per_env
        if n is not None and n < len(mine):
            mine = [mine[i * len(mine) // n] for i in range(n)]
        out.extend(mine)
    return out


def _work(batch) -> int:
    """A warm-start step's cost in tokens: the shared prompt prefix once (no gradient),
    the rest about three times (forward and backward)."""
    from envace_demo.train.logprobs import common_prefix

    shared = common_prefix(batch.prompt_ids)
    return shared + 3 * sum(len(p) - shared + len(c) for p, c in zip(batch.prompt_ids, batch.completion_ids))


def estimate(backend, model, sft_batches, recipe: DemoRecipe, bf16: bool) -> dict:
    """Seconds the recipe should take at this machine's speed now. The warm start: two
    real steps (forward and backward, no update) of a median batch of each role, timed
    and scaled by each batch's tokens: a batch's first step, then a step of a later epoch
    (which runs only the adapted layers, ``sft.FrozenBottom``). GRPO: a timed forward pass
    of 512 tokens gives tokens/s; a step costs G episodes of decoding and their update."""
    import contextlib
    import statistics

    import torch

    from envace_demo.train.sft import FrozenBottom, epoch_plan

    first_work, later_work = {}, {}
    for role in sorted({b.role for b in sft_batches}):
        mine = sorted((b for b in sft_batches if b.role == role), key=_work)
        batch = mine[len(mine) // 2]
        bottom = FrozenBottom(model, store_dtype=torch.bfloat16 if bf16 else None)
        for per_work in (first_work, later_work):
            ctx = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
            t0 = time.monotonic()
            with ctx:
                loss, _ = bottom.target_loss(batch, backend.pad_id)
            loss.backward()
            model.zero_grad(set_to_none=True)
            per_work[role] = (time.monotonic() - t0) / _work(batch)
    plan = epoch_plan(sft_batches, recipe.sft_epochs, {"rehearser": recipe.rehearser_epochs})
    seen: set[int] = set()
    sft_s = 0.0
    for epoch in plan:
        for b in epoch:
            sft_s += _work(b) * (later_work if id(b) in seen else first_work)[b.role]
            seen.add(id(b))

    vocab = model.config.get_text_config().vocab_size
    ids = torch.randint(0, min(1000, vocab), (1, 512))
    with torch.no_grad():
        model(input_ids=ids[:, :64])  # warm-up
        t0 = time.monotonic()
        model(input_ids=ids)
        tps = 512 / max(time.monotonic() - t0, 1e-6)
    g = recipe.grpo
    # Decoding runs about 40x below the forward pass's tokens/s on CPU (one token a step,
    # grammar masks); two generations (act, rehearse) per turn; then the update.
    decode_s = g.max_turns * 2 * g.max_new_tokens / (tps / 40)
    grpo_s = g.steps * g.prompts_per_step * (decode_s + g.group_size * 3 * 1500 / tps) if len(recipe.roles) > 1 else 0.0
    return {"tokens_per_s": round(tps), "sft_s": round(sft_s), "grpo_s": round(grpo_s),
            "total_s": round(sft_s + grpo_s), "sft_steps": sum(len(e) for e in plan),
            "step_s": {r: round(v * statistics.median(_work(b) for b in sft_batches if b.role == r), 1)
                       for r, v in first_work.items()},
            "later_step_s": {r: round(v * statistics.median(_work(b) for b in sft_batches if b.role == r), 1)
                             for r, v in later_work.items()}}


def write_tasks(scripted: list[ScriptedTask], path: Path) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for s in scripted:
            t = s.task
            fh.write(json.dumps({"name": t.name, "prompt": t.prompt, "env": t.env, "check": t.check,
                                 "split": t.split, "calls": [c.to_dict() for c in s.calls]}) + "\n")


def probe_rehearser(backend, rows, count: int) -> dict:
    """Greedy rehearsals of ``count`` warm-start rehearser rows (unconstrained): how many
    write a result and how many write the real one."""
    from envace_demo.calls import parse_execution_result
    from envace_demo.models.base import Sampling

    picked = [r for r in rows if r.role == "rehearser"][:count]
    parsed = exact = 0
    for row in picked:
        gen = backend.generate(row.request, Sampling(temperature=0.0, max_new_tokens=200))
        result, problem = parse_execution_result(gen.text)
        expected, _ = parse_execution_result(row.completion)
        parsed += problem is None
        exact += problem is None and result == expected
    return {"rows": len(picked), "parsed": parsed, "exact": exact}


def _outcomes(scripted: ScriptedTask) -> list[str]:
    """Each context call's outcome: "success" or its error code."""
    return [outcome_of(step.result) for step in scripted.steps if step.context]


def world_tasks(recipe: DemoRecipe, world: int, seeded: dict[str, list[str]] | None = None) -> list[ScriptedTask]:
    """The tasks whose rehearser rows varied ``world`` gives: tasks with a call that has
    context reads, ``recipe.world_tasks`` of them (spread over the environments, drawn
    by the world's seed), all where None. With ``recipe.world_contrast`` and ``seeded``
    (task name -> its context calls' outcomes in the seeded world), half of each share is
    drawn among the tasks whose outcomes differ here."""
    import random

    mine = [t for t in recipe_tasks(recipe, world) if any(step.context for step in t.steps)]
    n = recipe.world_tasks
    if n is None or n >= len(mine):
        return mine
    rng = random.Random(f"rehearser-world:{world}")
    out = []
    for k, env in enumerate(recipe.envs):
        share = n // len(recipe.envs) + (k < n % len(recipe.envs))
        pool = [t for t in mine if t.task.env == env]
        if recipe.world_contrast and seeded is not None:
            differ = [t for t in pool if _outcomes(t) != seeded.get(t.task.name)]
            picked = rng.sample(differ, min((share + 1) // 2, len(differ)))
            rest = [t for t in pool if t not in picked]
            out += picked + rng.sample(rest, min(share - len(picked), len(rest)))
        else:
            out += rng.sample(pool, min(share, len(pool)))
    return out


def outcome_of(result) -> str:
    """"success", or a refusal's error code."""
    return error_code(result) if is_error(result) else "success"


def even_outcomes(rows: list, cap: int, seed: int = 0, success_cap: int | None = None, flags: bool = False) -> list:
    """At most ``cap`` rows of each (tool, outcome), drawn by ``seed``, in their order; of a
    tool's successes at most ``success_cap`` where given. ``flags``: each setting of the
    call's boolean arguments is a class of its own."""
    import random

    by: dict[tuple, list[int]] = {}
    for i, row in enumerate(rows):
        arguments = getattr(row.call, "arguments", None) or {}
        setting = tuple(sorted((k, v) for k, v in arguments.items() if isinstance(v, bool))) if flags else ()
        by.setdefault((row.call.name, outcome_of(row.real), setting), []).append(i)
    rng = random.Random(f"even-outcomes:{seed}")
    caps = {key: success_cap if key[1] == "success" and success_cap is not None else cap for key in by}
    kept = sorted(i for key, idx in by.items() for i in (rng.sample(idx, caps[key]) if len(idx) > caps[key] else idx))
    return [rows[i] for i in kept]


def recipe_rows(backend, recipe: DemoRecipe, scripted: list[ScriptedTask]):
    """The warm start's rows: both roles on ``scripted`` (the seeded world), the
    rehearser's again in other wordings and in varied worlds (``rehearser_worlds``: its
    calls with context reads), the actor's again in varied worlds (each with the memory
    of the world before it, where ``memory_elsewhere``)."""
    from envace_demo.train.warmstart import warm_rows
    from envace_demo.train.worlds import rehearser_worlds, training_worlds

    facts = recipe.rehearser_facts
    # --seeded-rows none: the seeded world gives the rehearser no rows at all.
    seeded_roles = tuple(r for r in recipe.roles if r != "rehearser" or recipe.seeded_rows != "none")

    def capped(rows: list) -> list:
        if not recipe.world_rows_per_outcome:
            return rows
        return even_outcomes(rows, recipe.world_rows_per_outcome, recipe.seed, recipe.success_rows_per_outcome,
                             recipe.outcome_flags)

    rows = warm_rows(backend, scripted, memory_every=recipe.memory_every, thoughts=recipe.thoughts,
                     roles=seeded_roles, rehearse=recipe.seeded_rows, facts=facts,
                     actor_recovery=recipe.actor_recovery)
    for phrasing in range(1, recipe.rehearser_phrasings if "rehearser" in seeded_roles else 1):
        rows += warm_rows(backend, recipe_tasks(recipe, phrasing=phrasing), thoughts=recipe.thoughts,
                          roles=("rehearser",), rehearse=recipe.seeded_rows, facts=facts)
    seeded = {t.task.name: _outcomes(t) for t in scripted}
    varied = []
    for world in rehearser_worlds(recipe.rehearser_worlds if "rehearser" in recipe.roles else 0):
        mine = world_tasks(replace(recipe, world_tasks=None) if recipe.world_rows_per_outcome else recipe, world, seeded)
        varied += warm_rows(backend, mine, memory_every=0, thoughts=recipe.thoughts, roles=("rehearser",),
                            rehearse="context", facts=facts)
    rows += capped(varied)
    drills = []
    for world in rehearser_worlds(recipe.drill_worlds if facts and "rehearser" in recipe.roles else 0):
        mine = world_tasks(replace(recipe, world_tasks=None), world)
        drills += warm_rows(backend, mine, memory_every=0, thoughts=recipe.thoughts, roles=("rehearser",),
                            rehearse="brief", facts=True)
    rows += capped(drills)
    before = scripted
    for world in training_worlds(range(1, recipe.actor_variants + 1) if "actor" in recipe.roles else ()):
        mine = recipe_tasks(recipe, world)
        rows += warm_rows(backend, mine, memory_every=recipe.memory_every, thoughts=recipe.thoughts,
                          roles=("actor",), memory_from=before if recipe.memory_elsewhere else None,
                          actor_recovery=recipe.actor_recovery)
        before = mine
    return rows


def run_recipe(backend, recipe: DemoRecipe, out_dir: Path, say, stop=None) -> dict:
    """Run the recipe on ``backend`` (the embedded model, trained in place); ``say`` gets
    each log line. Returns the summary written to ``DIR/summary.json``."""
    from envace_demo.train.sft import attach_lora, batches, bf16_autocast_available
    from envace_demo.train.trainer import SUMMARY_FILE

    started = time.monotonic()
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / RECIPE_FILE).write_text(json.dumps(recipe.to_dict(), indent=2), encoding="utf-8")
    scripted = recipe_tasks(recipe)
    write_tasks(scripted, out_dir / TASKS_FILE)
    rows = recipe_rows(backend, recipe, scripted)
    tokenizer = backend.tokenizer
    stop_id = tokenizer.get_added_vocab().get("<|im_end|>", backend.stop_ids[0])
    tokenize = lambda text: tokenizer(text, add_special_tokens=False).input_ids  # noqa: E731
    sft_batches = batches(rows, tokenize, stop_id, recipe.sft_micro_batch, recipe.seed, recipe.outcome_weight,
                          recipe.facts_weight)
    roles = {r: sum(row.role == r for row in rows) for r in ("actor", "rehearser")}
    say(f"tasks: {len(scripted)} generated over {', '.join(recipe.envs)} (held-out example tasks apart); "
        f"warm-start rows: {roles['actor']} actor, {roles['rehearser']} rehearser, {len(sft_batches)} batches")
    import torch

    torch.manual_seed(recipe.seed)
    if recipe.from_adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(backend.model, recipe.from_adapter, is_trainable=True).eval()
    else:
        model = attach_lora(backend.model, recipe.lora_rank, recipe.lora_layers)
    backend.model = model
    bf16 = bf16_autocast_available() if recipe.sft_bf16 is None else recipe.sft_bf16
    est = estimate(backend, model, sft_batches, recipe, bf16)
    steps = ", ".join(f"{r} {s} s, {est['later_step_s'][r]} s in a later epoch" for r, s in est["step_s"].items())
    say(f"estimate at this machine's speed now (a warm-start step: {steps}{' in bfloat16' if bf16 else ''}; "
        f"{est['tokens_per_s']} tokens/s forward): warm start {est['sft_steps']} steps ~{est['sft_s'] / 60:.0f} min, "
        f"GRPO ~{est['grpo_s'] / 60:.0f} min, total ~{est['total_s'] / 60:.0f} min")
    sft_rows = _warm_start(backend, model, sft_batches, recipe, bf16, out_dir, say, stop, started)
    if sft_rows:  # kept apart: GRPO continues this adapter in place
        model.save_pretrained(out_dir / WARM_START_DIR)
        _name_base(out_dir / WARM_START_DIR)
    probe = probe_rehearser(backend, rows, recipe.probe_rows) if recipe.probe_rows else None
    if probe:
        say(f"after the warm start, greedy rehearsals of {probe['rows']} training calls: "
            f"{probe['parsed']} wrote a result, {probe['exact']} the real one")
    sft_s = time.monotonic() - started

    grpo_steps, grpo_seconds, adapter_dir = _grpo_stage(backend, recipe, scripted, out_dir, say, stop)
    summary = {
        "recipe": "demo-cpu",
        "model": backend.info.model_id,
        "roles": list(recipe.roles),
        "tasks": len(scripted),
        "warm_start": {"rows": roles, "steps": len(sft_rows), "seconds": round(sft_s, 1),
                       "first_loss": sft_rows[0] if sft_rows else None, "last_loss": sft_rows[-1] if sft_rows else None,
                       "rehearser_probe": probe},
        "grpo": {"steps": grpo_steps, "seconds": grpo_seconds},
        "estimate": est,
        "adapter": str(adapter_dir) if adapter_dir else None,
        "seconds": round(time.monotonic() - started, 1),
    }
    if adapter_dir is None and sft_rows:  # no GRPO step: the warm start's adapter
        result_dir = out_dir / "adapter"
        model.save_pretrained(result_dir)
        summary["adapter"] = str(result_dir)
    if summary["adapter"]:
        _name_base(Path(summary["adapter"]))
        if recipe.rehearser_facts and "rehearser" in recipe.roles:
            from envace_demo.models.adapters import write_reasoning
            from envace_demo.facts import MAX_FACTS_CHARS

            write_reasoning(Path(summary["adapter"]), MAX_FACTS_CHARS)
    (out_dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=2), encoding="utf-8")
    say(f"adapter: {summary['adapter']}; {summary['seconds'] / 60:.1f} min")
    return summary


def _warm_start(backend, model, sft_batches, recipe: DemoRecipe, bf16: bool, out_dir: Path, say, stop,
                started: float) -> list[dict]:
    """The warm start (SFT on the recipe's rows), each step's metrics written to
    ``DIR/sft_metrics.jsonl`` and said as it ends: the metric rows."""
    from envace_demo.train.sft import train_sft

    backend.row_prefixes.clear()
    sft_rows = []
    with (out_dir / SFT_METRICS_FILE).open("w", encoding="utf-8") as fh:
        for step in train_sft(model, sft_batches, epochs=recipe.sft_epochs, lr=recipe.sft_lr,
                              pad_id=backend.pad_id, seed=recipe.seed, stop=stop,
                              role_epochs={"rehearser": recipe.rehearser_epochs},
                              final_lr=recipe.sft_final_lr, autocast=bf16,
                              seconds=None if recipe.sft_minutes is None else 60 * recipe.sft_minutes):
            row = {**step.to_dict(), "elapsed": round(time.monotonic() - started, 1)}
            sft_rows.append(row)
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            say(f"warm start {step.step}/{step.total} (epoch {step.epoch}): {step.role} loss {step.loss:.3f}, "
                f"{step.tokens} target tokens, {step.seconds:.1f}s")
    backend.row_prefixes.clear()
    return sft_rows


def _grpo_stage(backend, recipe: DemoRecipe, scripted, out_dir: Path, say, stop) -> tuple[int, float, Path | None]:
    """Role-wise GRPO on the warm-started adapter, in place: (steps, seconds, adapter
    folder or None). Skipped for a one-role recipe: an episode needs both roles, and its
    reward would train weights that serve only one of them."""
    from envace_demo.train.events import StepFinished, TrainFinished
    from envace_demo.train.trainer import Trainer

    if len(recipe.roles) < 2:
        say(f"GRPO: skipped (an adapter of the {recipe.roles[0]} alone)")
        return 0, 0.0, None
    trainer = Trainer(backend, [s.task for s in scripted], [], recipe.grpo, out_dir,
                      copy_model=False, stop=stop, continue_adapter=True)
    result = None
    for event in trainer.run():
        if isinstance(event, StepFinished):
            m = event.metrics
            say(f"GRPO step {event.step}/{event.total}: reward actor {m['reward/actor']} rehearser "
                f"{m['reward/rehearser']}, success {m['success']}, {m['seconds']}s")
        elif isinstance(event, TrainFinished):
            result = event.result
    assert result is not None
    return result.steps_done, round(result.seconds, 1), result.adapter_dir


BASE_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"


def _name_base(adapter_dir: Path) -> None:
    """The adapter's config names its base model, not the local folder it was loaded from."""
    path = adapter_dir / "adapter_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config["base_model_name_or_path"] = BASE_MODEL
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
