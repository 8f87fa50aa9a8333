"""The deciding facts: the rehearser's reasoning targets (the facts its context shows, then
the outcome, read from real environments: their reads and their real responses), and the
facts the engine states as its reasoning's start at run time."""

from __future__ import annotations

from dataclasses import replace

from envace_demo.context import read_context
from envace_demo.envs.manual import ManualEnvironment
from envace_demo.envs.registry import create
from envace_demo.record import ToolCall
from envace_demo.facts import MAX_FACTS_CHARS, deciding_facts, stated_facts, stated_tokens
from envace_demo.train.generate import generated_tasks
from envace_demo.train.warmstart import EMPTY_THOUGHT, task_rows


def _facts(env_name: str, name: str, arguments: dict, state=None) -> tuple[str | None, object]:
    """The facts of a call made for real in a fresh ``env_name`` (changed by ``state``)."""
    env = create(env_name)
    if state:
        state(env._state)
    shown = read_context(env.context_reads(name, arguments), env.execute)
    result = env.execute(name, arguments)
    return deciding_facts(env_name, ToolCall(name, arguments), shown, result), result


def test_a_withdrawal_over_the_balance_states_the_balance_the_amount_and_the_refusal():
    def low(state):
        state["accounts"]["ACC-1005"]["balance"] = 15.5

    facts, result = _facts("bank", "withdraw", {"account_id": "ACC-1005", "amount": 40.0}, low)
    assert result["error"]["code"] == "INSUFFICIENT_FUNDS"
    assert facts == "ACC-1005: active, balance 15.5; amount 40.0 vs balance 15.5: over. Outcome: INSUFFICIENT_FUNDS."
    facts, result = _facts("bank", "withdraw", {"account_id": "ACC-1005", "amount": 10.0}, low)
    assert "error" not in result and facts.endswith("amount 10.0 vs balance 15.5: within. Outcome: success.")
    facts, _ = _facts("bank", "deposit", {"account_id": "ACC-1005", "amount": 40.0}, low)
    assert facts.endswith("amount 40.0. Outcome: success.")  # a deposit passes no bound


def test_a_transfer_states_both_accounts_and_what_is_left_of_the_days_limit():
    def spent(state):
        state["accounts"]["ACC-1002"].update(daily_transfer_limit=1000.0, transferred_today=800.0, balance=5000.0)

    facts, result = _facts(
        "bank", "transfer", {"from_account_id": "ACC-1002", "to_account_id": "ACC-1001", "amount": 500.0}, spent
    )
    assert result["error"]["code"] == "DAILY_LIMIT_EXCEEDED"
    assert facts.startswith("ACC-1002: active, balance 5000.0, 200.0 left today; ACC-1001: ")
    assert facts.endswith("amount 500.0 vs balance 5000.0: within, vs left today 200.0: over. "
                          "Outcome: DAILY_LIMIT_EXCEEDED.")


def test_a_write_states_whether_its_file_or_directory_is_there_and_the_overwrite_flag():
    facts, result = _facts("files", "write_file", {"path": "/notes/todo.txt", "content": "x"})
    assert result["error"]["code"] == "ALREADY_EXISTS"
    assert facts == "/notes/todo.txt: file exists; overwrite false. Outcome: ALREADY_EXISTS."
    facts, result = _facts("files", "write_file", {"path": "/projects/app/README.md", "content": "# App"})
    assert facts == "/projects/app: NOT_FOUND; overwrite false. Outcome: NOT_FOUND."
    facts, _ = _facts("files", "write_file", {"path": "/notes/new.txt", "content": "x"})
    assert facts == "/notes/new.txt: not in /notes; overwrite false. Outcome: success."


def test_a_hold_states_the_books_queue_and_the_patrons_holds_against_the_limit():
    facts, result = _facts("library", "place_hold", {"book_id": "BK-037", "patron_id": "P-1077"})
    assert result["error"]["code"] == "HOLD_LIMIT_REACHED"
    assert facts.endswith("P-1077: holds BK-037 already: no, holds 3 vs limit 3: full. Outcome: HOLD_LIMIT_REACHED.")
    facts, result = _facts("library", "place_hold", {"book_id": "BK-005", "patron_id": "P-1100"})
    assert result["error"]["code"] == "ALREADY_ON_HOLD"
    assert "P-1100: holds BK-005 already: yes, holds 1 vs limit 3: room" in facts

    def room(state):  # the same patron with a hold given back: the same call now succeeds
        state["patrons"]["P-1077"]["holds"].pop()

    facts, result = _facts("library", "place_hold", {"book_id": "BK-037", "patron_id": "P-1077"}, room)
    assert "error" not in result and facts.endswith("holds 2 vs limit 3: room. Outcome: success.")
    facts, _ = _facts("library", "place_hold", {"book_id": "BK-037", "patron_id": "P-0000"})
    assert facts.endswith("P-0000: PATRON_NOT_FOUND. Outcome: PATRON_NOT_FOUND.")


def test_facts_come_only_from_the_reads_shown():
    env = create("bank")
    call = ToolCall("withdraw", {"account_id": "ACC-1005", "amount": 40.0})
    other = read_context([("get_account", {"account_id": "ACC-1001"})], env.execute)
    assert deciding_facts("bank", call, [], {"error": {"code": "INSUFFICIENT_FUNDS", "message": "m"}}) is None
    assert deciding_facts("bank", call, other, {"new_balance": 1.0}) is None  # another account's read
    assert deciding_facts(None, call, other, {}) is None  # a user's own tools: no facts named


def test_rows_with_facts_reason_where_their_context_shows_some_and_stay_short(scripted):
    backend = scripted()
    rows = []
    for env in ("bank", "files", "library"):
        writes = [s for s in generated_tasks(env) if any(step.context for step in s.steps)]
        assert writes, env
        for s in writes[:6] + generated_tasks(env)[:3]:
            rows += task_rows(backend, s, with_memory=False, roles=("rehearser",), thoughts=False, facts=True)
    reasoned = [r for r in rows if not r.completion.startswith(EMPTY_THOUGHT)]
    assert {r.call.name for r in reasoned} >= {"deposit", "write_file", "place_hold"}
    for row in reasoned:
        thought = row.completion.split("</think>")[0].removeprefix("<think>\n").rstrip("\n")
        assert len(thought) <= MAX_FACTS_CHARS
        code = row.real["error"]["code"] if isinstance(row.real, dict) and "error" in row.real else "success"
        assert thought.endswith(f"Outcome: {code}.")
    # Reads answer from no context: their reasoning stays empty.
    assert all(r.completion.startswith(EMPTY_THOUGHT) for r in rows if r.call.name in ("get_account", "read_file"))


def test_a_rehearser_adapter_marked_as_reasoning_gets_its_bound_in_every_episode(scripted, tmp_path):
    from envace_demo.engine import EpisodeConfig
    from envace_demo.models.adapters import rehearser_think_chars, write_reasoning

    class Adapted(scripted):
        @property
        def info(self):
            return replace(super().info, extra={"rehearser_adapter": str(tmp_path)})

    backend = Adapted()
    assert rehearser_think_chars(backend) is None  # no mark: the run's own bound
    assert EpisodeConfig.for_backend(backend).rehearser_think_chars is None
    write_reasoning(tmp_path, MAX_FACTS_CHARS)
    assert rehearser_think_chars(backend) == MAX_FACTS_CHARS
    assert EpisodeConfig.for_backend(backend, think_chars=0).rehearser_think_chars == MAX_FACTS_CHARS
    assert EpisodeConfig.for_backend(backend, rehearser_think_chars=0).rehearser_think_chars == 0


def test_a_brief_row_shows_the_calls_tool_and_context_reads_alone_and_decides_as_the_full_row(scripted):
    """``rehearse="brief"``: one short row per call with context reads, its whitelist the
    called tool, its few-shot the context reads, its history the request; the target's
    facts and outcome are the full committed row's."""
    from envace_demo.prompts import CANDIDATE_TOOLS

    backend = scripted()
    writes = [s for s in generated_tasks("bank") if any(step.context for step in s.steps)][:8]
    for s in writes:
        full = [r for r in task_rows(backend, s, with_memory=False, roles=("rehearser",), facts=True,
                                     rehearse="context")]
        brief = task_rows(backend, s, with_memory=False, roles=("rehearser",), facts=True, rehearse="brief")
        assert len(brief) == len(full) >= 1
        for b, f in zip(brief, full):
            assert b.call == f.call and b.completion == f.completion and "Outcome: " in b.completion
            assert len(b.prompt) < len(f.prompt)
            user = b.request.messages[-1]["content"]
            whitelist = user.split(CANDIDATE_TOOLS, 1)[1].split("\n\n", 1)[0]
            assert f'"name": "{b.call.name}"' in whitelist and whitelist.count('"name": ') == 1
            step = next(st for st in s.steps if st.call == b.call)
            assert b.few_shot == list(step.context)
    # No facts, no brief rows: a drill teaches the step from facts to outcome.
    assert task_rows(backend, writes[0], with_memory=False, roles=("rehearser",), rehearse="brief") == []


def test_drill_worlds_add_brief_rows_from_training_worlds_alone(scripted):
    from envace_demo.train.recipe import DemoRecipe, recipe_rows, recipe_tasks

    recipe = replace(DemoRecipe(), roles=("rehearser",), envs=("bank",), seeded_rows="context", rehearser_facts=True)
    tasks = recipe_tasks(recipe)
    plain = recipe_rows(scripted(), recipe, tasks)
    drilled = recipe_rows(scripted(), replace(recipe, drill_worlds=2), tasks)
    extra = drilled[len(plain):]
    assert drilled[: len(plain)] == plain and extra
    assert all("Outcome: " in r.completion and r.committed for r in extra)
    # --seeded-rows none: a stage of drills alone.
    assert recipe_rows(scripted(), replace(recipe, drill_worlds=2, seeded_rows="none"), tasks) == extra
    capped = recipe_rows(scripted(), replace(recipe, drill_worlds=2, world_rows_per_outcome=1), tasks)
    assert len(plain) < len(capped) < len(drilled)
    # Without facts a drill has nothing to decide from: none are made.
    assert recipe_rows(scripted(), replace(recipe, drill_worlds=2, rehearser_facts=False), tasks) == \
        recipe_rows(scripted(), replace(recipe, rehearser_facts=False), tasks)


def test_stated_facts_are_the_target_up_to_the_outcome_which_stays_the_rehearsers():
    env = create("bank")
    env._state["accounts"]["ACC-1005"]["balance"] = 15.5
    call = ToolCall("withdraw", {"account_id": "ACC-1005", "amount": 40.0})
    shown = read_context(env.context_reads(call.name, call.arguments), env.execute)
    target = deciding_facts("bank", call, shown, env.execute(call.name, call.arguments))
    lead = env.stated_facts(call, shown)  # the bundled environment names its facts
    assert lead == stated_facts("bank", call, shown) == "ACC-1005: active, balance 15.5; amount 40.0 vs balance 15.5: over. Outcome: "
    assert target == lead + "INSUFFICIENT_FUNDS."
    assert env.stated_facts(call, []) is None  # no read shown, nothing to state
    assert ManualEnvironment(env.tools()).stated_facts(call, shown) is None  # a user's own tools: none


class _Constrained:
    """A scripted backend that takes constraints and keeps the rehearser's."""

    def __new__(cls, base, **script):
        class Backend(base):
            supports_constraints = True

            def generate(self, prompt, sampling, constraint=None, **kw):
                if constraint is not None and constraint.role == "rehearser":
                    self.leads.append(constraint.think_lead)
                    self.budgets.append(sampling.max_new_tokens)
                return super().generate(prompt, sampling, None, **kw)

        backend = Backend(**script)
        backend.leads, backend.budgets = [], []
        return backend


def test_the_engine_states_the_facts_of_a_write_to_a_rehearser_trained_on_them(scripted):
    """The imagined run's rehearsal of the withdrawal opens with the facts of the account the
    engine read for it; the committed call, asked in the same prompt, takes that prediction
    and records the same facts. Without a reasoning bound of its own (a rehearser not trained
    on facts), or with ``state_facts`` off, nothing is stated."""
    from conftest import call_text, result_text
    from envace_demo.engine import EpisodeConfig, run_episode
    from envace_demo.record import call_steps
    from envace_demo.tasks import Task

    withdraw = call_text("withdraw", {"account_id": "ACC-1005", "amount": 10})
    paid = {"transaction_id": "TX-5008", "account_id": "ACC-1005", "amount": 10, "new_balance": 5.5}

    def run(**config):
        backend = _Constrained(scripted, actor=[withdraw, "<think></think>\nDone.", "<think></think>\nDone."],
                               rehearser=[result_text(paid)])
        env = create("bank")
        traj = run_episode(backend, Task("w", "Withdraw $10 from ACC-1005.", env.tools()),
                           EpisodeConfig(mode="parallel", n=1, **config), env)
        return backend.leads, call_steps(traj.turns), backend.budgets

    leads, steps, budgets = run(rehearser_think_chars=MAX_FACTS_CHARS)
    lead = "ACC-1005: active, balance 15.5; amount 10 vs balance 15.5: within. Outcome: "
    assert leads == [lead]
    # The stated facts are not the rehearser's to pay for: its budget grows by their tokens.
    assert budgets == [EpisodeConfig().sampling.max_new_tokens + stated_tokens(lead)] and stated_tokens(lead) > 30
    (step,) = steps
    assert step.rehearsal_from == 0 and step.stated_facts == lead and step.real["new_balance"] == 5.5
    for config in ({}, {"rehearser_think_chars": MAX_FACTS_CHARS, "state_facts": False}):
        leads, steps, budgets = run(**config)
        assert leads == [None] and all(s.stated_facts is None for s in steps)
        assert budgets == [EpisodeConfig().sampling.max_new_tokens]
