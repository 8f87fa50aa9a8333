"""A question's read whose result holds none of the question's words gives way to the other
read of the same identifier (``engine/aside.py``): made for real in the actor's place, the
one that speaks to the question kept in the actor's history (scripted backend: exact outputs)."""

from conftest import call_text
from helpers.scripted import ScriptedBackend
from envace_demo.engine import EpisodeConfig, run_episode
from envace_demo.engine.aside import asked, question, same_entity, spoken, stem
from envace_demo.envs.registry import create
from envace_demo.record import ToolCall, call_steps
from envace_demo.schemas import find_tool
from envace_demo.tasks import Task

READ_ACCOUNT = call_text("get_account", {"account_id": "ACC-1001"})
RENT = "<think></think>\nThe rent payment came to 900.00 USD."


def _run(prompt, actor, **config):
    env = create("bank")
    backend = ScriptedBackend(actor=actor)
    traj = run_episode(backend, Task("t", prompt, env.tools()), EpisodeConfig(mode="none", **config), env)
    return traj, backend


def test_a_read_that_misses_the_question_gives_way_to_the_transactions():
    traj, backend = _run("How much did the rent payment on ACC-1001 come to?", [READ_ACCOUNT, RENT])
    account, transactions = call_steps(traj.turns)
    assert account.call.name == "get_account" and transactions.call == ToolCall("list_transactions",
                                                                                {"account_id": "ACC-1001"})
    assert "Rent" in str(transactions.real) and traj.turns[1].instead and not traj.turns[1].repaired
    assert "rent" in traj.turns[0].superseded and traj.turns[1].superseded is None
    # The actor answered once, shown the transactions and not the account it read first.
    assert "Harbor Property" in backend.prompts[-1] and "Alice Moreno" not in backend.prompts[-1]
    assert traj.final_answer.endswith("900.00 USD.") and traj.totals()["real_calls"] == 2


def test_the_sentence_that_asks_is_the_question_where_another_says_where_to_look():
    # "checking" and "account" are in any account's read: they say where to look, not what is asked.
    prompt = "How much did I pay in rent this month? My checking account is ACC-1001."
    traj, _ = _run(prompt, [READ_ACCOUNT, RENT])
    assert [s.call.name for s in call_steps(traj.turns)] == ["get_account", "list_transactions"]
    assert question(prompt) == "How much did I pay in rent this month?"
    assert question("Move it to /archive. Thanks.") == "Move it to /archive. Thanks."  # nothing asks
    # A question that says nothing but its asking words takes the whole request.
    traj, _ = _run("My checking account is ACC-1001. What is it?", [READ_ACCOUNT, "<think></think>\nAn account."])
    assert [s.call.name for s in call_steps(traj.turns)] == ["get_account"]


def test_a_read_that_speaks_to_the_question_stands():
    traj, _ = _run("What is the balance of ACC-1001?", [READ_ACCOUNT, "<think></think>\n1250.00 USD."])
    assert [s.call.name for s in call_steps(traj.turns)] == ["get_account"]  # "balance" is in its result


def test_when_neither_read_speaks_to_it_the_actors_read_stays():
    traj, backend = _run("Which zodiac sign has ACC-1001?", [READ_ACCOUNT, "<think></think>\nI cannot tell."])
    account, transactions = call_steps(traj.turns)
    assert transactions.call.name == "list_transactions" and "none of the question's words" in traj.turns[1].superseded
    assert traj.turns[0].superseded is None and "Alice Moreno" in backend.prompts[-1]


def test_an_instruction_and_the_switch_leave_the_read_alone():
    traj, _ = _run("Pull up ACC-1001 for the rent payment.", [READ_ACCOUNT, RENT])
    assert len(call_steps(traj.turns)) == 1  # not a question
    traj, _ = _run("How much did the rent payment on ACC-1001 come to?", [READ_ACCOUNT, RENT], read_instead=False)
    assert len(call_steps(traj.turns)) == 1


def test_the_words_asked_and_the_same_entity():
    call = ToolCall("get_account", {"account_id": "ACC-1001"})
    assert asked("How much did the rent payment on ACC-1001 come to?", call) == {"rent", "payment"}
    # The words that name the account where it is written say where to look, not what is asked.
    assert asked("how much was the grocery run on my checking account ACC-1001 this week?", call) == {
        "grocery", "run", "week"}
    assert asked("Which zodiac sign has ACC-1001?", call) == {"zodiac", "sign"}  # a verb ends the name
    assert stem("holding") == stem("holds") == "hold" and stem("yes") == "yes"
    assert spoken({"description": "Rent - Harbor"}, {"rent", "payment"}) == {"rent"}
    tools = create("bank").tools()
    assert same_entity(find_tool(tools, "list_transactions"), call) == ToolCall("list_transactions",
                                                                               {"account_id": "ACC-1001"})
    assert same_entity(find_tool(tools, "deposit"), call) is None  # it requires an amount too
    library = create("library").tools()
    assert same_entity(find_tool(library, "get_patron"), ToolCall("get_book", {"book_id": "BK-001"})) is None


def test_a_question_put_after_a_clause_is_that_question():
    from envace_demo.engine.aside import question

    said = "looking at ben okafor's checking, ACC-1003 - how much was his last payroll deposit and which employer paid it?"
    assert question(said) == "how much was his last payroll deposit and which employer paid it?"
    assert question("How much did I pay in rent? My checking account is ACC-1001.") == "How much did I pay in rent?"
