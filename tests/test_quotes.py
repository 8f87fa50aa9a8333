"""A final answer ending on a real result's text cut short gets the rest of it
(``engine/quotes.py``; scripted backend)."""

from conftest import call_text
from helpers.scripted import ScriptedBackend
from envace_demo.engine import EpisodeConfig, run_episode
from envace_demo.engine.quotes import rest_of
from envace_demo.envs.registry import create
from envace_demo.tasks import Task

NOTES = "/notes/meeting-2025-03-10.md"
READ = call_text("read_file", {"path": NOTES})
CUT = ("<think></think>\n/notes/meeting-2025-03-10.md contains: # Team sync, 2025-03-10\nAttendees: Ana, Raj, Mei\n"
       "- Ship v2.1 on Friday\n- Raj writes the release notes")


def _run(actor, **config):
    env = create("files")
    backend = ScriptedBackend(actor=actor)
    task = Task("t", f"When is the next sync? It's in {NOTES}.", env.tools())
    return run_episode(backend, task, EpisodeConfig(mode="none", **config), env)


def test_an_answer_that_copied_a_file_cut_short_gets_the_rest_of_it():
    traj = _run([READ, CUT])
    assert traj.final_answer.endswith("- Raj writes the release notes\n- Next sync: 2025-03-17")
    assert traj.turns[-1].completed == CUT.split("\n", 1)[1]  # the actor's words, kept


def test_an_answer_that_quotes_no_result_or_the_switch_stand():
    said = "<think></think>\nThe next sync is on 2025-03-17."
    assert _run([READ, said]).turns[-1].completed is None
    traj = _run([READ, CUT], whole_quotes=False)
    assert traj.turns[-1].completed is None and traj.final_answer.endswith("release notes")


def test_rest_of():
    text = "- buy milk\n- call the plumber about the kitchen sink\n- renew passport before June\n"
    assert rest_of("It says: - buy milk\n- call the plumber about the kitchen sink", text) == (
        "\n- renew passport before June")
    assert rest_of("It says: - buy milk\n- call the plumber about the kitchen sink \n", text) is not None
    assert rest_of("It says: - buy milk", text) is None  # one line: a quote of one item, not a copy cut short
    assert rest_of("the plumber about the kitchen sink", text) is None  # not the text's opening
    assert rest_of("- buy milk\n- call the plumber about the kitchen sink\n- renew passport before June", text) is None
    assert rest_of("a\nb", "a\nb\nc") is None  # under MIN_QUOTED characters
