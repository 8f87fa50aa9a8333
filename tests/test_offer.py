"""``engine/offer.py``: which writes a request names, by the words of a tool's name and of its
description's first sentence that no read-only tool has."""

import threading

import pytest

from envace_demo.engine.commit import Committer
from envace_demo.engine.offer import names_write, tool_words
from envace_demo.envs.registry import create
from envace_demo.schemas import find_tool


def _names(env_name, tool, request):
    env = create(env_name)
    tools = env.tools()
    committer = Committer(env, None, threading.Event(), None, True, 10.0, None, None)
    return names_write(find_tool(tools, tool), request, tools, committer)


@pytest.mark.parametrize("env_name, tool, said, named", [
    ("library", "place_hold", "Do you have anything by Chinua Achebe? If so, put it on hold for me.", True),
    ("library", "place_hold", "What is Priya Nair holding at the moment? Her card is P-1100.", False),
    ("library", "place_hold", "Do you have any books by Jane Austen?", False),  # "book": every library tool's
    ("files", "create_directory", "When must I renew my passport? It's on my todo list in /notes.", False),
    ("files", "create_directory", "Can you make a new folder? What is in /notes?", True),
    ("bank", "deposit", "How much did the rent payment on ACC-1001 come to?", False),
    ("bank", "freeze_account", "Move $300 to savings, then freeze the checking account.", True),
])
def test_a_request_names_a_write(env_name, tool, said, named):
    assert _names(env_name, tool, said) is named


def test_the_words_of_a_tool():
    tool = find_tool(create("library").tools(), "place_hold")
    assert tool_words(tool, described=False) == {"place", "hold"}
    assert {"place", "hold", "book", "patron"} <= tool_words(tool)


@pytest.mark.parametrize("said, asks", [
    ("i took some cash out of an atm a few days ago on ACC-1001, which atm was it?", True),
    ("According to my budget spreadsheet under /projects, how much did I spend in February?", True),
    ("Add up what Alice paid for rent and groceries out of ACC-1001 - what's the total?", True),
    ("Which books does card P-1077 have on hold?", True),
    ("Could you place a hold on Dune for P-1077?", False),  # an instruction, worded politely
    ("Move $50 to ACC-1002, which is my savings.", False),  # a relative clause, no question mark
    ("Withdraw 20 USD from ACC-1005, then tell me the new balance.", False),
    # Information asked for as a statement; a need for something done is an instruction.
    ("I need the transaction ID of the electric bill payment on ACC-1003 for a dispute form.", True),
    ("hey, tell me my balance on ACC-1001", True),
    ("I need my account ACC-1001 frozen now", False),
    ("I need the balance of ACC-1002 moved to ACC-1001", False),
    ("Deposit $20 into ACC-1001. Tell me the new balance.", False),
    # A question word after its preposition.
    ("My todo list says something about my passport. By when am I supposed to renew it?", True),
    ("In the notes folder, write a file called a.txt saying hi.", False),
    ("hey, card P-1077. can u remind me which books i've got on hold right now?", True),
])
def test_a_question_put_after_a_clause_asks(said, asks):
    from envace_demo.engine.imagined import asks_a_question

    assert asks_a_question(said) is asks


def test_a_question_put_after_a_clause_is_offered_no_withdrawal():
    """Read as an instruction, "..., which atm was it?" was offered the withdrawal, and the small
    actor withdrew 1000 USD for real; as a question, it is offered the reads alone."""
    from envace_demo.engine.config import EpisodeConfig
    from envace_demo.engine.offer import offered

    env = create("bank")
    tools = env.tools()
    committer = Committer(env, None, threading.Event(), None, True, 10.0, None, None)

    class Prompt:
        messages = [{"role": "user", "content": "i took cash out of an atm on ACC-1001, which atm was it?"}]

    names = {t.name for t in offered(tools, Prompt(), False, EpisodeConfig(), committer)}
    assert "list_transactions" in names and not names & {"withdraw", "deposit", "transfer", "freeze_account"}


def test_optional_choices_and_numbers_are_those_the_user_said():
    from envace_demo.engine.offer import said_options

    tools = create("library").tools()
    browse = find_tool(tools, "list_books")
    oldest = said_options(browse, "What's the oldest book you have in the science section?")
    properties = oldest.parameters["properties"]
    assert properties["genre"]["enum"] == ["science"]  # "science-fiction" needs "fiction" said too
    assert not {"year_from", "year_to", "limit", "sort_by"} & set(properties)  # nobody said a year or an order
    assert "author" not in properties  # no name said
    before = said_options(browse, "Any science-fiction published before 1950? Sort them by year.")
    assert set(before.parameters["properties"]["genre"]["enum"]) == {"science", "fiction", "science-fiction"}
    assert before.parameters["properties"]["year_to"]["enum"] == [1950]
    assert before.parameters["properties"]["sort_by"]["enum"] == ["year"]
    assert said_options(browse, "Up to 50 books please").parameters["properties"].get("limit") is None  # max 10
    # A required choice stays the model's: the reason to freeze an account.
    freeze = find_tool(create("bank").tools(), "freeze_account")
    assert said_options(freeze, "Please freeze ACC-1002") is freeze


def test_optional_free_texts_are_names_or_quotes_of_the_users():
    from envace_demo.engine.offer import names_and_quotes, said_options

    browse = find_tool(create("library").tools(), "list_books")
    assert "author" not in said_options(browse, "What's the oldest book in the science section?").parameters["properties"]
    by = said_options(browse, "I'd like something by Kazuo Ishiguro. Which of his books is in?")
    assert by.parameters["properties"]["author"]["enum"] == ["Kazuo Ishiguro", "Kazuo", "Ishiguro"]
    deposit = find_tool(create("bank").tools(), "deposit")
    label = said_options(deposit, "Please deposit $1,250.40 into ACC-1002 and label it 'IRS refund'.")
    assert label.parameters["properties"]["description"]["enum"] == ["IRS refund"]
    assert "description" not in said_options(deposit, "Deposit $50 into ACC-1003.").parameters["properties"]
    # A sentence's opening word, an identifier, a greeting: no name.
    assert names_and_quotes("Pay Ben Okafor back from ACC-1001. Hi, I'm Maya.") == [
        "Ben Okafor", "Ben", "Okafor", "Maya"]
    assert names_and_quotes("Maya here, card P-1042. I'm after Agatha Christie's books") == [
        "Agatha Christie", "Agatha", "Christie"]


def test_a_writes_amount_is_a_number_said_or_shown():
    """Asked for a transaction id "for a dispute form", the small actor transferred 1000 USD, a
    number nobody wrote: a write's required amount is one the user said or a result shown holds."""
    from envace_demo.engine.offer import said_amounts

    env = create("bank")
    committer = Committer(env, None, threading.Event(), None, True, 10.0, None, None)
    transfer, balance = find_tool(env.tools(), "transfer"), find_tool(env.tools(), "get_account")
    assert said_amounts(transfer, set(), committer) is None  # nothing said: it waits for a read
    held = said_amounts(transfer, {"40", "15.5", "ACC-1005"}, committer)
    assert held.parameters["properties"]["amount"]["enum"] == [15.5, 40.0]
    assert held.parameters["properties"]["from_account_id"] == transfer.parameters["properties"]["from_account_id"]
    assert said_amounts(balance, set(), committer) is balance  # a read is never held


def test_an_episode_offers_the_write_only_with_an_amount_said_or_read():
    """"withdraw every last cent": no amount said, so no withdrawal is on offer until the balance is read."""
    from helpers.scripted import ConstrainedBackend
    from conftest import call_text
    from envace_demo.engine import EpisodeConfig, run_episode
    from envace_demo.tasks import Task

    env = create("bank")
    backend = ConstrainedBackend(actor=[call_text("get_account", {"account_id": "ACC-1005"}),
                                        call_text("withdraw", {"account_id": "ACC-1005", "amount": 15.5}),
                                        "<think></think>\nDone."])
    run_episode(backend, Task("t", "Withdraw every last cent from ACC-1005 as cash.", env.tools()),
                EpisodeConfig(mode="none"), env)
    first, second = backend.constraints[0], backend.constraints[1]
    assert "withdraw" not in {t.name for t in first.tools}
    (withdraw,) = [t for t in second.tools if t.name == "withdraw"]
    assert 15.5 in withdraw.parameters["properties"]["amount"]["enum"]
    assert env.state()["accounts"]["ACC-1005"]["balance"] == 0.0


def test_a_yes_no_filter_of_a_read_is_offered_only_where_the_user_names_it():
    """Asked for the oldest book in the catalog, the actor read only the books on the shelf."""
    from envace_demo.engine.offer import said_options

    books = find_tool(create("library").tools(), "list_books")
    assert "available_only" not in said_options(books, "What's the oldest book in your catalog?", True).parameters[
        "properties"]
    assert "available_only" in said_options(books, "Which books are available now?", True).parameters["properties"]
    # A write's flag is the request's to ask for (``engine/repair.py`` asks for overwrite), not the grammar's.
    write = find_tool(create("files").tools(), "write_file")
    assert "overwrite" in said_options(write, "Save hi to /notes/a.txt").parameters["properties"]


def test_a_required_choice_is_held_to_what_the_user_says_and_not_to_what_they_deny():
    from envace_demo.engine.offer import said_choices

    reasons = ["lost_card", "stolen_card", "suspected_fraud", "customer_request"]
    assert said_choices(reasons, "My debit card for ACC-1001 was stolen this morning. Freeze it.") == ["stolen_card"]
    travel = "Freeze my savings ACC-1002? Nothing was lost or stolen, I just want nothing moving while I travel."
    assert said_choices(reasons, travel) == ["suspected_fraud", "customer_request"]
    assert said_choices(reasons, "Freeze ACC-1004 please.") is None  # as declared: the actor's to choose


def test_a_change_the_request_does_not_name_is_not_offered_where_it_names_another_write():
    from envace_demo.engine.offer import unnamed_changes

    env = create("files")
    committer = Committer(env, None, threading.Event(), None, True, 10.0, None, None)
    add = ("Add a file /notes/todo.txt with the line '- call mom on Sunday'. If a file with that name is already "
           "there, don't touch it - save mine as /notes/todo-2.txt instead.")
    assert unnamed_changes(env.tools(), add, committer) == {"move_file", "delete_file"}
    # Asked to move, nothing is deleted; asked nothing by name, nothing is held back.
    assert unnamed_changes(env.tools(), "Move /notes/todo.txt into /archive.", committer) == {"delete_file", "write_file"}
    assert unnamed_changes(env.tools(), "Put the stylesheet away in /archive.", committer) == set()
