"""Words the user dictated go into a call as the user wrote them (``verbatim.py``), where
the schema leaves their case free; through the engine, in both modes."""

import pytest

from conftest import call_text
from envace_demo.engine import EpisodeConfig, run_episode
from envace_demo.envs.registry import create
from envace_demo.record import Action, ToolCall, call_steps
from envace_demo.tasks import Task
from envace_demo.verbatim import as_dictated, dictated, parse_dictated

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
