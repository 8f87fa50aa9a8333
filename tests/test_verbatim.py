"""Words the user dictated go into a call as the user wrote them (``verbatim.py``), where
the schema leaves their case free; through the engine, in both modes."""

import pytest

from conftest import call_text
from envace_demo.engine import EpisodeConfig, run_episode
from envace_demo.envs.registry import create
from envace_demo.record import Action, ToolCall, call_steps
from envace_demo.tasks import Task
from envace_demo.verbatim import as_dictated, dictated, dictated_as, parse_dictated, whole

FILES = create("files").tools()
LIBRARY = create("library").tools()
DENTIST = "Please create a new file at /notes/dentist.txt containing exactly: Dentist Tuesday 3pm"


def _action(name, arguments):
    return Action(text="", calls=[ToolCall(name, arguments)])


def test_a_dictated_value_in_other_case_is_spelt_as_the_request_spells_it():
    action = as_dictated(_action("write_file", {"path": "/notes/dentist.txt", "content": "dentist Tuesday 3pm"}),
                         [DENTIST], FILES)
    assert action.calls[0].arguments == {"path": "/notes/dentist.txt", "content": "Dentist Tuesday 3pm"}
    assert action.restored == ['write_file.content: "dentist Tuesday 3pm" as the request spells it, '
                               '"Dentist Tuesday 3pm"']


def test_a_value_whose_schema_fixes_its_spelling_stays_as_drawn():
    # The genre is an enum and the path a pattern: the schema's spelling, not the user's.
    request = "What's the oldest book in the Science section? Also read /Notes/A.txt"
    genre = as_dictated(_action("list_books", {"genre": "science"}), [request], LIBRARY)
    assert genre.calls[0].arguments == {"genre": "science"} and not genre.restored
    path = as_dictated(_action("read_file", {"path": "/notes/a.txt"}), [request], FILES)
    assert path.calls[0].arguments == {"path": "/notes/a.txt"} and not path.restored
    # A free string (the author) is the user's.
    author = as_dictated(_action("list_books", {"author": "agatha christie"}), ["Anything by Agatha Christie?"],
                         LIBRARY)
    assert author.calls[0].arguments == {"author": "Agatha Christie"}


@pytest.mark.parametrize("value, requests, expected", [
    ("Cancelled", ["Overwrite it so that it just says: Cancelled"], None),  # as written already
    ("cancelled", ["Overwrite it so that it just says: Cancelled"], "Cancelled"),
    ("postponed", ["Overwrite it so that it just says: Cancelled"], None),  # not in the request
    ("ship v2.2", ["Earlier request", "Write: Ship v2.2 next week"], "Ship v2.2"),  # any user turn
    ("3", ["Write: 3"], None),  # no letter: nothing to spell
    (42, ["Write 42"], None),  # not a string
])
def test_dictated(value, requests, expected):
    assert dictated(value, requests) == expected


def test_parsing_keeps_the_calls_as_drawn_where_the_setting_is_off():
    text = call_text("write_file", {"path": "/notes/dentist.txt", "content": "dentist Tuesday 3pm"})
    names = {t.name for t in FILES}
    assert parse_dictated(text, names, FILES, [DENTIST]).calls[0].arguments["content"] == "Dentist Tuesday 3pm"
    assert parse_dictated(text, names, FILES, [DENTIST], False).calls[0].arguments["content"] == "dentist Tuesday 3pm"


@pytest.mark.parametrize("mode", ["none", "parallel"])
@pytest.mark.parametrize("on", [True, False])
def test_the_file_is_written_as_the_user_dictated_it(scripted, mode, on):
    write = call_text("write_file", {"path": "/notes/dentist.txt", "content": "dentist Tuesday 3pm"})
    created = '<execution_result>\n{"path": "/notes/dentist.txt", "size": 19, "created": true}\n</execution_result>'
    imagined = ["<think></think>\nNo call."] if mode == "parallel" else []  # the imagined run answers
    backend = scripted(actor=[*imagined, write, "<think></think>\nSaved.", "<think></think>\nSaved."],
                       rehearser=[created] * 2)
    env = create("files")
    traj = run_episode(backend, Task("t", DENTIST, env.tools()), EpisodeConfig(mode=mode, n=1, dictated_case=on), env)
    (step,) = call_steps(traj.turns)
    expected = "Dentist Tuesday 3pm" if on else "dentist Tuesday 3pm"
    assert step.call.arguments["content"] == expected and env.state()["files"]["/notes/dentist.txt"] == expected
    assert bool(traj.turns[0].action.restored) is on


STYLE = ("I want to start my stylesheet over from scratch. Overwrite /projects/website/style.css so the whole "
         "file is just: body { background: #111; color: #eee; }")


@pytest.mark.parametrize("value, request_, expected", [
    ("#111; color: #eee;", STYLE, "body { background: #111; color: #eee; }"),  # the longest span, not the last colon's
    ("Back soon", "Overwrite /projects/website/index.html with: <h1>Back soon</h1>", "<h1>Back soon</h1>"),
    ("cancelled", "The sync got cancelled after all. Make the notes just say: Cancelled", "Cancelled"),
    ("march", "Transfer $450 with the memo 'March savings'.", None),  # under MOST of the span: a part of it
    ("apr,1010", "Add a row to /projects/budget.csv: apr,1010. Keep the other rows as they are.", None),
    ("body { background: #111; color: #eee; }", STYLE, None),  # the span already
    ("a.md", "Rename a.md to: a.md.bak", None),  # the user wrote it as it is, apart from the span
    ("flour, milk", "a file containing exactly: flour, milk, eggs", "flour, milk, eggs"),
    (7, "Write: 7 and more", None),
])
def test_whole(value, request_, expected):
    assert whole(value, [request_]) == expected


def test_a_span_another_argument_holds_is_not_given_again():
    assert whole("notes.txt", ["Rename it to: Notes.txt"], others=["Notes.txt"]) is None
    assert whole("notes.txt", ["Rename it to: Notes.txt"]) == "Notes.txt"
    assert whole("Back soon", ["Overwrite it with: <h1>Back soon</h1>"], max_length=10) is None  # over maxLength


def test_only_a_call_that_may_change_state_is_given_the_whole_span():
    request = "Overwrite /projects/website/index.html with: <h1>Back soon</h1>"
    write = _action("write_file", {"path": "/projects/website/index.html", "content": "Back soon", "overwrite": True})
    writes = {"write_file": True, "search_catalog": False}.get
    made = as_dictated(write, [request], FILES, writes)
    assert made.calls[0].arguments["content"] == "<h1>Back soon</h1>"
    assert made.restored == ['write_file.content: "Back soon" is most of what the user dictated, "<h1>Back soon</h1>"']
    search = as_dictated(_action("search_catalog", {"query": "Remains of the Day"}),
                         ["Hold this for P-1042: The Remains of the Day, please"], LIBRARY, writes)
    assert search.calls[0].arguments == {"query": "Remains of the Day"} and not search.restored


def test_a_tool_of_unknown_effect_keeps_its_calls():
    """A pasted schema or a BFCL record says nothing of what its tools do: no span is given."""
    request = "Overwrite /projects/website/index.html with: <h1>Back soon</h1>"
    write = _action("write_file", {"path": "/projects/website/index.html", "content": "Back soon"})
    assert as_dictated(write, [request], FILES).calls[0].arguments["content"] == "Back soon"
    assert as_dictated(write, [request], FILES, lambda name: None).calls[0].arguments["content"] == "Back soon"


def test_an_optional_text_the_user_dictates_by_name_is_passed():
    """Told to put "Birthday gift" as the description, the actor deposited without one."""
    bank = create("bank").tools()
    writes = {"deposit": True, "transfer": True}.get
    request = 'Please deposit $75.40 into ACC-1005 and put "Birthday gift" as the description.'
    made = as_dictated(_action("deposit", {"account_id": "ACC-1005", "amount": 75.4}), [request], bank, writes)
    assert made.calls[0].arguments["description"] == "Birthday gift" and "the user dictated it" in made.restored[0]
    memo = as_dictated(_action("transfer", {"from_account_id": "ACC-1002", "to_account_id": "ACC-1001", "amount": 5}),
                       ["Send $5 from ACC-1002 to ACC-1001 with memo Pizza night please"], bank, writes)
    assert memo.calls[0].arguments["memo"] == "Pizza night"
    # Two memos for two transfers, or none named: nothing is added.
    two = "Two transfers: $600 with memo Rent, then a separate $600 with memo Car payment."
    assert dictated_as("memo", two) == ["Rent", "Car payment"]
    assert "memo" not in as_dictated(_action("transfer", {"from_account_id": "ACC-1002", "to_account_id": "ACC-1001",
                                                          "amount": 600}), [two], bank, writes).calls[0].arguments
    assert dictated_as("memo", "add a memo and a description") == []
    assert as_dictated(_action("deposit", {"account_id": "ACC-1005", "amount": 75.4}), [request], bank).restored == []


@pytest.mark.parametrize("request_text, passed, expected", [
    ("Transfer $1200 from my savings ACC-1002 to my checking ACC-1001, please.",
     {"from_account_id": "ACC-1002", "to_account_id": "ACC-1002"}, {"from_account_id": "ACC-1002", "to_account_id": "ACC-1001"}),
    # "into it" names no account; "from ACC-1001" does, and the two are swapped.
    ("If it's below $500, transfer $200 into it from ACC-1001.",
     {"from_account_id": "ACC-1003", "to_account_id": "ACC-1001"}, {"from_account_id": "ACC-1001", "to_account_id": "ACC-1003"}),
    # Two accounts after "to": neither is bound.
    ("From ACC-1002, send $50 to ACC-1001 and another $50 to Ben's ACC-1003.",
     {"from_account_id": "ACC-1002", "to_account_id": "ACC-1003"}, {"from_account_id": "ACC-1002", "to_account_id": "ACC-1003"}),
])
def test_an_identifier_the_user_wrote_after_its_preposition_goes_to_that_argument(request_text, passed, expected):
    bank = create("bank").tools()
    made = as_dictated(_action("transfer", {**passed, "amount": 5}), [request_text], bank, {"transfer": True}.get)
    assert {k: v for k, v in made.calls[0].arguments.items() if k.endswith("_id")} == expected
    assert bool(made.restored) == (passed != expected)


def test_an_argument_is_dictated_by_the_noun_its_description_opens_with():
    """The deposit's ``description`` is an "Optional note shown in the transaction history"."""
    request = 'Please deposit $75.40 into account ACC-1005 and put the note "Birthday gift from Grandma" on it.'
    made = as_dictated(_action("deposit", {"account_id": "ACC-1005", "amount": 75.4}), [request],
                       create("bank").tools(), {"deposit": True}.get)
    assert made.calls[0].arguments["description"] == "Birthday gift from Grandma"
