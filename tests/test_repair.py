"""Another path for a held call, found by rehearsal (``engine/repair.py``): the plans it may
commit, and the ones it must not (a scripted backend that takes grammars: exact outputs force
each path; the candidates come from a queue of their own, told apart by their temperature)."""

import pytest

from conftest import call_text, result_text
from helpers.scripted import ScriptedBackend, sure
from envace_demo.engine import EpisodeConfig, run_episode
from envace_demo.engine.repair import CANDIDATE_TEMPERATURE, is_prerequisite, is_variant, named_part, stems, written
from envace_demo.envs.registry import create
from envace_demo.models.base import Generation, Sampling
from envace_demo.record import ToolCall, call_steps, is_error
from envace_demo.tasks import Task

README = {"path": "/projects/app/README.md", "content": "# App"}
NO_DIR = {"error": {"code": "NOT_FOUND", "message": "no such directory: /projects/app"}}
# The same failure with no folder named: only a candidate the actor draws can find the folder.
NO_PARENT = {"error": {"code": "NOT_FOUND", "message": "the parent folder does not exist"}}
TODO = {"path": "/notes/todo.txt", "content": "- water the plants"}
EXISTS = {"error": {"code": "ALREADY_EXISTS", "message": "/notes/todo.txt already exists"}}


class _Constrained(ScriptedBackend):
    """A scripted backend the engine hands grammars to; candidates drawn for a repair come from
    ``candidates``."""

    supports_constraints = True

    def __init__(self, actor=(), rehearser=(), candidates=()):
        super().__init__(actor, rehearser)
        self.candidates = list(candidates)
        self.candidate_seeds: list[int | None] = []
        self.actor_seeds: list[int | None] = []

    def generate(self, prompt, sampling, constraint=None, on_token=None, cancel=None):
        if sampling.temperature == CANDIDATE_TEMPERATURE and constraint is not None and constraint.role == "actor":
            self.candidate_seeds.append(sampling.seed)
            if not self.candidates:
                raise AssertionError("candidates exhausted")
            text = self.candidates.pop(0)
            return Generation(text, max(1, len(text) // 4), 10, 0.0)
        if constraint is None or constraint.role == "actor":
            self.actor_seeds.append(sampling.seed)
        return super().generate(prompt, sampling, constraint, on_token, cancel)


def _run(env, prompt, actor, rehearser, candidates=(), **config):
    backend = _Constrained(actor, rehearser, candidates)
    environment = create(env)
    cfg = EpisodeConfig(mode="parallel", n=1, **config)
    traj = run_episode(backend, Task("t", prompt, environment.tools()), cfg, environment)
    return traj, environment, backend


def _ok(value, p=0.99):
    return sure(result_text(value), p)


def test_a_missing_folder_is_created_first_when_both_steps_are_foreseen_to_go_through():
    write = call_text("write_file", README)
    traj, env, backend = _run(
        "files", "Save a file /projects/app/README.md that contains: # App",
        actor=["<think></think>\nNo call.", write, "<think></think>\nSaved."],
        rehearser=[_ok(NO_PARENT), _ok({"path": "/projects/app", "created": True}),
                   _ok({"path": "/projects/app/README.md", "size": 5, "created": True})],
        # the held call again (skipped), a folder named as the file (not a proper part), the folder
        candidates=[write, call_text("create_directory", {"path": "/projects/app/README.md"}),
                    call_text("create_directory", {"path": "/projects/app"})],
    )
    held, made, written = call_steps(traj.turns)
    assert held.held and held.real is None
    assert made.call == ToolCall("create_directory", {"path": "/projects/app"}) and made.real["created"] is True
    assert written.call.name == "write_file" and written.call.arguments == README and "error" not in written.real
    assert env.state()["files"]["/projects/app/README.md"] == "# App"
    assert "create_directory first" in traj.turns[1].repaired and "after create_directory" in traj.turns[2].repaired
    # The held write was rehearsed once, after the folder, in that imagined world: not asked again.
    assert written.repeats_hold and len(backend.rehearser) == 0
    totals = traj.totals()
    assert (totals["real_calls"], totals["real_errors"], totals["held_calls"], totals["repaired_calls"]) == (2, 0, 1, 2)
    assert traj.final_answer == "Saved."


def test_a_variant_that_keeps_every_value_and_adds_overwrite_replaces_the_file():
    traj, env, _ = _run(
        "files", "Replace everything in /notes/todo.txt with: - water the plants",
        actor=["<think></think>\nNo call.", call_text("write_file", TODO), "<think></think>\nReplaced."],
        rehearser=[_ok(EXISTS), _ok({"path": "/notes/todo.txt", "size": 18, "created": False})],
        candidates=[call_text("delete_file", {"path": "/notes/todo.txt"}),  # not additive: never made
                    call_text("write_file", {**TODO, "overwrite": True})],
    )
    held, replaced = call_steps(traj.turns)
    assert held.held and replaced.call.arguments == {**TODO, "overwrite": True}
    assert env.state()["files"]["/notes/todo.txt"] == "- water the plants"
    assert "overwrite=true" in traj.turns[1].repaired
    assert traj.totals()["real_errors"] == 0
    # The held turn gave way: the answer is drawn from the write that ran, not the foreseen refusal.
    assert "another path" in traj.turns[0].superseded and "ALREADY_EXISTS" not in traj.turns[2].actor_prompt


def test_a_foreseen_failure_that_asks_for_what_the_call_passes_holds_nothing():
    """The rehearser foresaw "pass overwrite=true" for a write that passed it: the write runs."""
    asked = {"error": {"code": "ALREADY_EXISTS", "message": "/notes/todo.txt already exists; pass overwrite=true"}}
    traj, env, backend = _run(
        "files", "Overwrite /notes/todo.txt with: - water the plants",
        actor=["<think></think>\nNo call.", call_text("write_file", {**TODO, "overwrite": True}),
               "<think></think>\nDone."],
        rehearser=[_ok(asked)],
    )
    (step,) = call_steps(traj.turns)
    assert step.self_contradicted and not step.held and step.real["created"] is False
    assert env.state()["files"]["/notes/todo.txt"] == "- water the plants" and backend.candidate_seeds == []
    # The same foresight for the write without the flag is a failure foreseen, and holds it.
    traj, _, _ = _run("files", "Write /notes/todo.txt: - water the plants",
                      actor=["<think></think>\nNo call.", call_text("write_file", TODO), "<think></think>\nExists."],
                      rehearser=[_ok(asked)], repair_candidates=0)
    assert call_steps(traj.turns)[0].held and not call_steps(traj.turns)[0].self_contradicted


@pytest.mark.parametrize("message, arguments, contradicted", [
    ("pass overwrite=true to replace it", {"overwrite": True}, True),
    ("pass overwrite=true to replace it", {"overwrite": False}, False),
    ("pass overwrite=true to replace it", {}, False),
    ("use retries=3", {"retries": 3}, True),
    ("use retries=3", {"retries": True}, False),  # a flag is not the number 3
    ("limit=3 reached", {"limit": 3}, False),  # it states, it does not ask
])
def test_what_a_foreseen_failure_asks_for(message, arguments, contradicted):
    from envace_demo.engine.commit import contradicts_call

    call = ToolCall("f", arguments)
    assert contradicts_call({"error": {"code": "X", "message": message}}, call) is contradicted


@pytest.mark.parametrize("foreseen", [_ok(EXISTS), _ok({"path": "/notes/todo.txt", "size": 18, "created": False}, 0.6)],
                         ids=["foreseen-to-fail", "unsure"])
def test_a_variant_not_surely_foreseen_to_go_through_is_never_made(foreseen):
    """The search ends with nothing: the actor acts as it would have, with the seed it had."""
    traj, env, backend = _run(
        "files", "Replace everything in /notes/todo.txt with: - water the plants",
        actor=["<think></think>\nNo call.", call_text("write_file", TODO), "<think></think>\nIt already exists."],
        rehearser=[_ok(EXISTS), foreseen],
        candidates=[call_text("write_file", {**TODO, "overwrite": True})] * 4,
        sampling=Sampling(seed=7),
    )
    (held,) = call_steps(traj.turns)
    assert held.held and held.trusted and not any(t.repaired for t in traj.turns)
    assert env.state()["files"]["/notes/todo.txt"].startswith("- buy milk")
    assert len(backend.candidate_seeds) == 4  # the same variant, rehearsed once, then skipped
    # The committed actor's seeds are the ones an episode without the search draws.
    plain, _, base = _run(
        "files", "Replace everything in /notes/todo.txt with: - water the plants",
        actor=["<think></think>\nNo call.", call_text("write_file", TODO), "<think></think>\nIt already exists."],
        rehearser=[_ok(EXISTS)], repair_candidates=0, sampling=Sampling(seed=7),
    )
    assert backend.actor_seeds == base.actor_seeds and None not in base.actor_seeds
    assert traj.final_answer == plain.final_answer and set(backend.candidate_seeds).isdisjoint(base.actor_seeds)


def test_a_request_that_cannot_be_met_keeps_the_users_amount():
    """A smaller withdrawal would go through; it is not what was asked, so it is never made."""
    traj, env, backend = _run(
        "bank", "Withdraw $40 from ACC-1005.",
        actor=["<think></think>\nNo call.", call_text("withdraw", {"account_id": "ACC-1005", "amount": 40}),
               "<think></think>\nACC-1005 holds too little."],
        rehearser=[_ok({"error": {"code": "INSUFFICIENT_FUNDS", "message": "ACC-1005 holds 15.50"}})],
        candidates=[call_text("withdraw", {"account_id": "ACC-1005", "amount": 15.5}),
                    call_text("deposit", {"account_id": "ACC-1005", "amount": 40})] * 2,
    )
    (held,) = call_steps(traj.turns)
    assert held.held and env.state()["accounts"]["ACC-1005"]["balance"] == 15.5
    assert len(backend.rehearser) == 0 and not backend.candidates  # no candidate was worth a rehearsal


def test_no_search_without_candidates_or_a_grammar(scripted):
    write = call_text("write_file", README)
    traj, _, backend = _run("files", "Save /projects/app/README.md with: # App",
                            actor=["<think></think>\nNo call.", write, "<think></think>\nNo such folder."],
                            rehearser=[_ok(NO_DIR)], repair_candidates=0)
    assert backend.candidate_seeds == [] and call_steps(traj.turns)[0].held
    plain = scripted(actor=["<think></think>\nNo call.", write, "<think></think>\nNo such folder."],
                     rehearser=[_ok(NO_DIR)])
    env = create("files")
    traj = run_episode(plain, Task("t", "Save /projects/app/README.md with: # App", env.tools()),
                       EpisodeConfig(mode="parallel", n=1), env)
    assert not any(t.repaired for t in traj.turns) and not plain.actor


def test_what_counts_as_a_variant_or_a_prerequisite():
    held = ToolCall("write_file", {"path": "/a/b/c.txt", "content": "x"})
    assert is_variant(held, ToolCall("write_file", {"path": "/a/b/c.txt", "content": "x", "overwrite": True}))
    assert not is_variant(held, ToolCall("write_file", {"path": "/a/b/c.txt", "content": "y", "overwrite": True}))
    assert not is_variant(held, held)  # nothing added
    assert not is_variant(held, ToolCall("copy_file", {"path": "/a/b/c.txt", "content": "x", "overwrite": True}))
    folder = ToolCall("create_directory", {"path": "/a/b"})
    assert is_prerequisite(held, folder, additive=True)
    assert not is_prerequisite(held, folder, additive=False)  # a tool that may destroy: never unasked
    assert not is_prerequisite(held, ToolCall("create_directory", {"path": "/a/b/c.txt"}), additive=True)
    assert not is_prerequisite(held, ToolCall("create_directory", {"path": "/elsewhere"}), additive=True)
    money = ToolCall("withdraw", {"account_id": "ACC-1005", "amount": 40})
    assert not is_prerequisite(money, ToolCall("deposit", {"account_id": "ACC-1005", "amount": 40}), additive=True)


def test_the_bundled_environments_declare_which_writes_only_add():
    assert create("files").additive("create_directory") and not create("files").additive("delete_file")
    assert not create("files").additive("write_file") and not create("bank").additive("withdraw")


TRAVEL = "/notes/travel/japan/packing.txt"
PACKING = {"path": TRAVEL, "content": "passport, yen"}


def _missing(folder):
    return _ok({"error": {"code": "NOT_FOUND", "message": f"no such directory: {folder}"}})


def test_folders_the_foreseen_failures_name_are_made_in_order_asking_the_actor_nothing():
    """The held write's failure names /notes/travel/japan; making it is foreseen to fail naming
    /notes/travel, which is foreseen to go through; then the first, then the held write."""
    write = call_text("write_file", PACKING)
    traj, env, backend = _run(
        "files", f"Save {TRAVEL} with: passport, yen",
        actor=["<think></think>\nNo call.", write, "<think></think>\nSaved."],
        rehearser=[_missing("/notes/travel/japan"), _missing("/notes/travel"),
                   _ok({"path": "/notes/travel", "created": True}), _ok({"path": "/notes/travel/japan", "created": True}),
                   _ok({"path": TRAVEL, "size": 13, "created": True})],
    )
    held, parent, folder, written = call_steps(traj.turns)
    assert held.held and held.real is None
    assert [parent.call.arguments, folder.call.arguments] == [{"path": "/notes/travel"}, {"path": "/notes/travel/japan"}]
    assert parent.call.name == folder.call.name == "create_directory" and written.call == held.call
    assert env.state()["files"][TRAVEL] == "passport, yen" and not any(is_error(s.real) for s in (parent, folder, written))
    assert backend.candidate_seeds == [] and backend.rehearser == []  # no draw; five rehearsals, all used
    assert "named by the foreseen failure" in traj.turns[1].repaired
    assert traj.turns[3].repaired == 'the held write_file, after create_directory "/notes/travel", create_directory "/notes/travel/japan"'
    assert traj.totals()["repaired_calls"] == 3 and traj.final_answer == "Saved."


def test_a_folder_the_user_wrote_is_made_where_it_likely_goes_through():
    """The rehearser gave the missing folder's creation 0.88, below the hold's 0.9: a folder the
    user wrote is made where its success is more likely than not (``LIKELY``)."""
    traj, env, _ = _run(
        "files", "Save /notes/travel/packing.txt with: passport, yen",
        actor=["<think></think>\nNo call.", call_text("write_file", {**PACKING, "path": "/notes/travel/packing.txt"}),
               "<think></think>\nSaved."],
        rehearser=[_missing("/notes/travel"), _ok({"path": "/notes/travel", "created": True}, p=0.88),
                   _ok({"path": "/notes/travel/packing.txt", "size": 13, "created": True})],
    )
    assert [s.call.name for s in call_steps(traj.turns)] == ["write_file", "create_directory", "write_file"]
    assert env.state()["files"]["/notes/travel/packing.txt"] == "passport, yen"


def test_no_folder_is_made_for_a_path_the_user_never_wrote():
    """Asked to move the stylesheet "into the /archive folder", the actor made up a path under
    /archive; the folders its foreseen failure named were not the user's, so none is made."""
    made_up = "/archive/projects/website/style.css"
    write = call_text("write_file", {"path": made_up, "content": "x"})
    traj, env, _ = _run(
        "files", "Could you put a copy of my stylesheet into the /archive folder?",
        actor=["<think></think>\nNo call.", write, "<think></think>\nI could not do that."],
        rehearser=[_missing("/archive/projects/website"), _missing("/archive/projects"),
                   _ok({"path": "/archive/projects", "created": True}),
                   _ok({"path": "/archive/projects/website", "created": True}),
                   _ok({"path": made_up, "size": 1, "created": True})],
        candidates=[write] * 4,
    )
    assert not any(s.call.name == "create_directory" for s in call_steps(traj.turns))
    assert "/archive/projects" not in env.state()["directories"]
    assert written("/notes/travel", [f"Save {TRAVEL} with: passport"]) and not written("/archive/projects", ["in /archive"])


def test_a_plan_whose_step_fails_for_real_gives_the_turn_back_to_the_actor():
    """Foreseen wrongly (the folder's parent is missing too), the folder fails for real: the
    held write is not made after it; the actor acts from the real failure."""
    write = call_text("write_file", PACKING)
    traj, env, _ = _run(
        "files", f"Save {TRAVEL} with: passport, yen",
        actor=["<think></think>\nNo call.", write, "<think></think>\nThe folder could not be made."],
        rehearser=[_missing("/notes/travel/japan"), _ok({"path": "/notes/travel/japan", "created": True}),
                   _ok({"path": TRAVEL, "size": 13, "created": True})],
    )
    held, folder = call_steps(traj.turns)
    assert held.held and folder.call.name == "create_directory" and is_error(folder.real)
    assert TRAVEL not in env.state()["files"] and traj.final_answer == "The folder could not be made."


@pytest.mark.parametrize("message, arguments, part", [
    ("no such directory: /notes/travel/japan", {"path": TRAVEL, "content": "x"}, "/notes/travel/japan"),
    ("no such directory: /notes/travel", {"path": TRAVEL}, "/notes/travel"),
    ("/notes/todo.txt already exists; pass overwrite=true", {"path": "/notes/todo.txt"}, None),  # the whole value
    ("no such directory: /notes/travelling", {"path": TRAVEL}, "/notes"),  # "/notes/travel" not whole
    ("account ACC-1002 can transfer 1000.00 USD more today", {"from_account_id": "ACC-1002"}, None),
])
def test_which_part_of_a_call_a_foreseen_failure_names(message, arguments, part):
    assert named_part(ToolCall("write_file", arguments), {"error": {"code": "X", "message": message}}) == part
    assert named_part(ToolCall("write_file", arguments), {"path": "/notes"}) is None  # no failure


ASKS = {"error": {"code": "ALREADY_EXISTS", "message": "/notes/todo.txt already exists; pass overwrite=true to replace it"}}


@pytest.mark.parametrize("prompt, replaced", [
    ("Replace everything in /notes/todo.txt with: - water the plants", True),
    ("Overwrite /notes/todo.txt with: - water the plants", True),
    ("Start /notes/todo.txt with '- water the plants'. If there's already a file by that name, leave it alone.", False),
    # A wish not to overwrite names overwriting, and asks for none of it.
    ("Make /notes/todo.txt saying - water the plants. If it's already there, don't overwrite it; call it todo-2.txt",
     False),
])
def test_the_variant_a_foreseen_failure_asks_for_is_made_only_where_the_request_asks_for_it_too(prompt, replaced):
    write = call_text("write_file", TODO)
    before = create("files").state()["files"]["/notes/todo.txt"]
    traj, env, backend = _run(
        "files", prompt, actor=["<think></think>\nNo call.", write, "<think></think>\nDone."],
        rehearser=[_ok(ASKS), _ok({"path": "/notes/todo.txt", "size": 18, "created": False})],
        candidates=[] if replaced else [write] * 4,  # the actor insists on its own call
    )
    steps = call_steps(traj.turns)
    assert steps[0].held
    if replaced:
        assert backend.candidate_seeds == [] and steps[1].call.arguments == {**TODO, "overwrite": True}
        assert env.state()["files"]["/notes/todo.txt"] == "- water the plants"
        assert "asks for it, and so does the request" in traj.turns[1].repaired
    elif "todo-2.txt" in prompt:  # the file stays; the name the request gives for it is taken instead
        assert env.state()["files"]["/notes/todo.txt"] == before
        assert steps[1].call.arguments == {**TODO, "path": "/notes/todo-2.txt"}
        assert env.state()["files"]["/notes/todo-2.txt"] == TODO["content"]
        assert "the request gives it for when the first fails" in traj.turns[1].repaired
    else:  # the asked-for variant was never rehearsed: the file stays
        assert len(steps) == 1 and env.state()["files"]["/notes/todo.txt"] == before
        assert len(backend.candidate_seeds) == 4 and len(backend.rehearser) == 1


def test_stems():
    assert stems("to replace it") & stems("Replace everything")
    assert stems("overwrite") & stems("Overwriting the file")
    assert not stems("overwrite to replace it") & stems("Start a file. If there's already one, leave it alone.")
    assert stems("pass true false with") == set()


def test_a_made_up_path_is_written_where_the_request_names():
    """The actor made up /system/notes/errands.txt for "my notes folder": foreseen read-only, the
    write is made in /notes, which the user named, once its rehearsal there goes through."""
    made_up = {"path": "/system/notes/errands.txt", "content": "pick up dry cleaning"}
    denied = {"error": {"code": "PERMISSION_DENIED", "message": "/system/notes/errands.txt is on a read-only path"}}
    traj, env, _ = _run(
        "files", "Save a new note called errands.txt in my notes folder that says: pick up dry cleaning",
        actor=["<think></think>\nNo call.", call_text("write_file", made_up), "<think></think>\nSaved."],
        # A success more likely than not is enough for what the request itself names.
        rehearser=[_ok(denied), _ok({"path": "/notes/errands.txt", "size": 20, "created": True}, 0.85)],
        candidates=[],
    )
    held, written = call_steps(traj.turns)
    assert held.held and held.real is None
    assert written.call.arguments == {**made_up, "path": "/notes/errands.txt"} and "error" not in written.real
    assert env.state()["files"]["/notes/errands.txt"] == "pick up dry cleaning"
    assert "what the request names, which is there" in traj.turns[1].repaired


@pytest.mark.parametrize("arguments, request_text, meant", [
    ({"source": "/projects/budget-2025.csv", "destination": "/projects/budget-2025.csv"},
     "rename budget.csv in my projects folder to budget-2025.csv (same folder)",
     {"source": "/projects/budget.csv", "destination": "/projects/budget-2025.csv"}),
    ({"source": "/archive/projects/website/x.html", "destination": "/archive/projects/website/projects.md"},
     "Could you move the stylesheet from my website project into the /archive folder? Keep the same file name.",
     {"source": "/projects/website/style.css", "destination": "/archive/style.css"}),
    ({"source": "/projects/meeting-notes/310688", "destination": "/archive/908206"},
     "Please move the March 10 meeting notes into the archive folder.",
     {"source": "/notes/meeting-2025-03-10.md", "destination": "/archive/meeting-2025-03-10.md"}),
    # What the user wrote stands; a request that names nothing there gives nothing.
    ({"source": "/projects/budget.csv", "destination": "/archive/budget.csv"}, "move /projects/budget.csv to /archive",
     None),
    ({"source": "/notes/a.txt", "destination": "/archive/a.txt"}, "move my recipe into the archive", None),
])
def test_what_a_made_up_path_stands_for(arguments, request_text, meant):
    assert create("files").write_instead("move_file", arguments, [request_text]) == meant
