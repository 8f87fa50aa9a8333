"""An answer to a question that leaves out what the real reads said of it is taken back and
the actor answers again, at most twice (``engine/asked.py``; real environments, scripted
backend)."""

import pytest

from conftest import call_text
from helpers.scripted import constrained_episode
from envace_demo.engine.asked import ASK_AGAIN, missed, superlative, untold, what_was_found
from envace_demo.engine.detail import asking_part, csv_rows
from envace_demo.envs.registry import create
from envace_demo.record import ToolCall, call_steps

AUTHOR = "Who is the author of Silent Spring?"
GET_BOOK = call_text("get_book", {"book_id": "BK-035"})
SHELF = "<think></think>\nSilent Spring is on shelf 363.7 CAR."
CARSON = "<think></think>\nSilent Spring was written by Rachel Carson."


def _reads(env_name, calls):
    env = create(env_name)
    return [(ToolCall(name, args), env.execute(name, args)) for name, args in calls]


_run = constrained_episode


def test_the_field_a_question_names_and_what_its_asking_word_asks_for():
    book = _reads("library", [("get_book", {"book_id": "BK-035"})])
    assert missed(AUTHOR, book, "It is on shelf 363.7 CAR.") == ["Rachel Carson"]
    assert missed(AUTHOR, book, "Carson wrote it.") == []  # a word of the name is enough
    assert missed("Where would I find Silent Spring?", book, "Try the science section.") == ["363.7 CAR"]
    patron = _reads("library", [("get_patron", {"patron_id": "P-1042"})])
    assert missed("Whose library card is P-1042?", patron, "It has no holds.") == ["Maya Lindqvist"]


def test_a_unit_or_how_large_asks_for_the_size():
    budget = _reads("files", [("read_file", {"path": "/projects/budget.csv"})])
    dump = "/projects/budget.csv contains: month,amount jan,1200 feb,980 mar,1105"
    assert missed("How many bytes is /projects/budget.csv?", budget, dump) == ["39"]
    assert missed("How large is /projects/budget.csv?", budget, dump) == ["39"]
    assert missed("How large is /projects/budget.csv?", budget, "It is 39 bytes.") == []


def test_in_rows_only_those_holding_a_word_of_the_question_count():
    history = _reads("bank", [("get_account", {"account_id": "ACC-1001"}),
                              ("list_transactions", {"account_id": "ACC-1001"})])
    atm = "I took cash out of an ATM from ACC-1001 this week. How much was it?"
    left = missed(atm, history, "The groceries came to 84.37 USD.")
    assert "60.0" in left and "1250.0" not in left  # the ATM row's amount, not the account's balance
    assert missed(atm, history, "You took out $60.00 at the ATM on 5th Ave.") == []
    # "which" asks what a row is called or described as: the ATM row's description.
    which = "i took some cash out of an atm a few days ago on ACC-1001, which atm was it?"
    assert missed(which, history, "The atm did withdraw 84.37 USD from ACC-1001.") == ["ATM withdrawal - 5th Ave"]
    assert missed(which, history, "It was the ATM on 5th Ave.") == []
    # The rows holding the most of the question's words: the rent payment, not every payment.
    rent = "How much did the rent payment on ACC-1001 come to?"
    assert "900.0" in missed(rent, history, "The groceries came to 84.37 USD.")
    assert missed(rent, history, "The rent was 900.00 USD.") == []


def test_a_question_in_parts_is_answered_only_where_each_part_is():
    history = _reads("bank", [("list_transactions", {"account_id": "ACC-1001"})])
    both = "I took cash out at an ATM recently on my checking (ACC-1001). How much was it and which ATM?"
    assert missed(both, history, "The last transactions: 2100.00 USD, 60.00 USD.") == ["ATM withdrawal - 5th Ave"]
    amount = missed(both, history, "It was the ATM on 5th Ave.")
    assert "60.0" in amount and "ATM withdrawal - 5th Ave" not in amount
    assert missed(both, history, "You took out 60.00 USD at the ATM on 5th Ave.") == []


def test_whether_it_can_be_used_asks_for_its_status():
    account = _reads("bank", [("get_account", {"account_id": "ACC-1004"})])
    question = "Who owns account ACC-1004, and can money be moved out of it right now?"
    assert missed(question, account, "Account ACC-1004 (Chen Wei, checking) has no current balance.") == ["frozen"]
    assert missed(question, account, "Chen Wei owns it, and it is frozen.") == []


def test_an_identifier_counts_where_the_question_asks_for_one():
    history = _reads("bank", [("list_transactions", {"account_id": "ACC-1003"})])
    need = "I need the transaction ID of the electric bill payment on ACC-1003 for a dispute form."
    assert missed(need, history, "Electric bill - Metro Power, 139.75 USD.") == ["TX-5006"]
    assert missed(need, history, "It is TX-5006.") == []
    assert "TX-5006" not in missed("How much was the electric bill on ACC-1003?", history, "It was paid.")


def test_who_a_payment_went_to_is_its_description():
    history = _reads("bank", [("list_transactions", {"account_id": "ACC-1001"})])
    who = "hey, who did my rent payment go to? it came out of ACC-1001 a few days ago"
    assert missed(who, history, "The last one was Grocery - Fresh Market, 84.37 USD.") == ["Rent - Harbor Property Mgmt"]
    assert missed(who, history, "It went to Harbor Property Mgmt.") == []


def test_the_rows_of_a_csv_file_answer_what_they_hold():
    budget = _reads("files", [("list_directory", {"path": "/projects"}),
                              ("read_file", {"path": "/projects/budget.csv"})])
    feb = "How much did we spend in February? It's in the budget spreadsheet in /projects."
    assert missed(feb, budget, "/projects contains: budget.csv, website.") == ["980"]
    assert missed(feb, budget, "February came to 980.") == []
    assert csv_rows("a,b\n1,x\n2") == [] and csv_rows("just text, with a comma") == []


def test_nothing_is_asked_for_where_the_question_names_no_field():
    found = _reads("library", [("search_catalog", {"query": "Morrison"})])
    assert missed("Does the library have anything by Toni Morrison?", found, "No.") == []
    # A zero is told in words ("none available"): never asked for as a number.
    cosmos = _reads("library", [("get_book", {"book_id": "BK-037"})])
    assert missed("How many copies of Cosmos are available?", cosmos, "None right now.") == []


def test_an_answer_that_leaves_out_what_was_asked_is_answered_again():
    traj, backend, _ = _run(AUTHOR, [GET_BOOK, SHELF, CARSON])
    assert traj.final_answer.endswith("Rachel Carson.") and traj.success is None
    answers = [t for t in traj.turns if not t.calls]
    assert "Rachel Carson" in answers[0].withdrawn and not answers[1].withdrawn
    assert not backend.constraints[2].tools  # asked again for an answer: no call on offer


def test_asked_again_at_most_twice_then_the_values_are_added_to_the_last_answer():
    wrong = [SHELF.replace("363.7 CAR", f"shelf {k}") for k in range(ASK_AGAIN + 1)]
    traj, _, _ = _run(AUTHOR, [GET_BOOK, *wrong, CARSON])
    answers = [t for t in traj.turns if not t.calls]
    assert len(answers) == ASK_AGAIN + 1 and [bool(t.withdrawn) for t in answers] == [True] * ASK_AGAIN + [False]
    said = wrong[-1].split("\n", 1)[1]
    assert answers[-1].added == said  # the actor's words, kept
    assert traj.final_answer == f"{said}\n\nWhat the tools returned: get_book BK-035: author Rachel Carson."
    assert traj.ungrounded == []  # every value added is a real one


def test_a_field_the_question_itself_names_comes_before_what_its_asking_word_asks_for():
    account = _reads("bank", [("get_account", {"account_id": "ACC-1005"})])
    limit = "how much am i allowed to transfer per day out of ACC-1005"
    # "transfer" names daily_transfer_limit; "how much" alone would take the balance too.
    assert missed(limit, account, "ACC-1005 has a balance of 15.50 USD.") == ["500.0"]
    assert missed(limit, account, "You can send up to 500 USD a day.") == []
    assert missed("How much is in ACC-1005?", account, "It is active.") == ["15.5"]  # no field named: the balance


def test_the_values_added_say_the_read_and_row_they_came_from():
    history = _reads("bank", [("list_transactions", {"account_id": "ACC-1001"})])
    rent = "How much did the rent payment on ACC-1001 come to?"
    found = untold(rent, history, "It is active.")
    assert {(f.tool, f.key, f.value) for f in found} >= {("list_transactions", "amount", 900.0)}
    assert what_was_found(found).startswith("list_transactions TX-")
    assert "amount 900.0" in what_was_found(found)


@pytest.mark.parametrize("prompt, actor, config", [
    (AUTHOR, [GET_BOOK, SHELF], {"answer_what_asked": False}),  # switched off
    ("Tell me about Silent Spring, BK-035.", [GET_BOOK, SHELF], {}),  # no question
    ("Hold Silent Spring, BK-035, for P-1042.",  # a write made, and nothing else asked
     [call_text("place_hold", {"book_id": "BK-035", "patron_id": "P-1042"}), SHELF], {}),
    ("Can you hold Silent Spring, BK-035, for P-1042?",  # a polite instruction asks for the hold alone
     [call_text("place_hold", {"book_id": "BK-035", "patron_id": "P-1042"}), SHELF], {}),
])
def test_nothing_is_asked_again_without_a_question_or_switched_off(prompt, actor, config):
    traj, _, _ = _run(prompt, actor, **config)
    assert traj.final_answer == SHELF.split("\n", 1)[1]
    assert not any(t.withdrawn for t in traj.turns)
    assert len(call_steps(traj.turns)) == len(actor) - 1


def test_a_field_no_read_returned_is_read_before_the_answer():
    """The search has no shelf; get_book says it returns the shelf mark, on the id the search found."""
    search = call_text("search_catalog", {"query": "Cosmos"})
    guessed = "<think></think>\nCosmos is on shelf BK-037."
    told = "<think></think>\nCosmos is on shelf 520 SAG."
    traj, _, _ = _run("What shelf is Cosmos on?", [search, guessed, told])
    steps = call_steps(traj.turns)
    assert [(s.call.name, s.call.arguments) for s in steps] == [("search_catalog", {"query": "Cosmos"}),
                                                               ("get_book", {"book_id": "BK-037"})]
    assert steps[1].real["shelf"] == "520 SAG" and traj.turns[2].instead
    assert "get_book" in traj.turns[1].withdrawn and traj.final_answer == "Cosmos is on shelf 520 SAG."


def test_no_read_is_made_for_a_row_the_question_does_not_single_out():
    search = call_text("search_catalog", {"query": "Ishiguro"})  # two books: which one's shelf?
    answer = "<think></think>\nBoth are on the fiction shelves."
    traj, _, _ = _run("What shelf are the Ishiguro novels on?", [search, answer])
    assert [s.call.name for s in call_steps(traj.turns)] == ["search_catalog"]
    assert traj.final_answer == "Both are on the fiction shelves."


HOLD = call_text("place_hold", {"book_id": "BK-035", "patron_id": "P-1042"})


def test_after_a_write_what_the_instruction_asks_besides_is_asked_for():
    traj, _, _ = _run("Who is the author of Silent Spring? Hold it for P-1042.", [GET_BOOK, HOLD, SHELF, CARSON])
    answers = [t for t in traj.turns if not t.calls]
    assert "Rachel Carson" in answers[0].withdrawn and traj.final_answer.endswith("Rachel Carson.")
    assert asking_part("Hold it for P-1042, and tell me its shelf mark.") == "its shelf mark."
    assert asking_part("Move it into /archive. What is left in /notes?") == "What is left in /notes?"
    assert asking_part("Can you move it into /archive?") is None
    assert asking_part("send the max it allows. and give me the transaction id") == "the transaction id"


def test_after_a_write_a_field_no_call_returned_is_read_on_the_written_identifier():
    """The search and the hold have no shelf; get_book returns the "shelf mark", on the book held."""
    search = call_text("search_catalog", {"query": "Brave New World"})
    hold = call_text("place_hold", {"book_id": "BK-003", "patron_id": "P-1100"})
    placed = "<think></think>\nHold placed on Brave New World for P-1100."
    told = "<think></think>\nHold placed; it is on shelf SF HUX."
    traj, _, _ = _run("Put a hold on Brave New World for card P-1100, and tell me its shelf mark.",
                      [search, hold, placed, told])
    steps = call_steps(traj.turns)
    assert [(s.call.name, s.call.arguments) for s in steps][-1] == ("get_book", {"book_id": "BK-003"})
    assert "get_book" in [t for t in traj.turns if not t.calls][0].withdrawn
    assert traj.final_answer == "Hold placed; it is on shelf SF HUX."


def test_after_a_write_that_failed_nothing_is_asked_for():
    full = "Put a hold on Silent Spring, BK-035, for P-1077 and tell me who wrote it."  # P-1077: at the limit
    refused = "<think></think>\nP-1077 already has 3 holds, the limit."
    traj, _, _ = _run(full, [call_text("place_hold", {"book_id": "BK-035", "patron_id": "P-1077"}), refused])
    assert traj.final_answer == "P-1077 already has 3 holds, the limit." and not any(t.withdrawn for t in traj.turns)


def test_a_listed_field_is_told_by_the_names_its_reads_give():
    reads = _reads("library", [("get_patron", {"patron_id": "P-1077"})])
    holds = "Which books does library card P-1077 currently have on hold?"
    found = untold(holds, reads, "P-1077 may hold 3 books.")
    # "holds" is named whole, "hold_limit" in part: the holds, as ids where no read named them.
    assert [(f.key, f.text()) for f in found] == [("holds", "BK-001, BK-020, BK-033")]
    reads += _reads("library", [("get_book", {"book_id": b}) for b in ("BK-001", "BK-020", "BK-033")])
    (found,) = untold(holds, reads, "P-1077 may hold 3 books.")
    assert found.text() == ("BK-001 (Nineteen Eighty-Four), BK-020 (To Kill a Mockingbird), "
                            "BK-033 (The Name of the Rose)")
    told = "Tom holds Nineteen Eighty-Four, To Kill a Mockingbird and The Name of the Rose."
    assert untold(holds, reads, told) == []
    assert untold(holds, reads, "Tom holds To Kill a Mockingbird.") != []  # one of three is not all


def test_the_identifiers_a_question_asks_about_are_read_before_it_answers_again():
    """The patron's holds are book ids: each is read with get_book, the one read their pattern fits."""
    holds = "Which books does library card P-1077 currently have on hold?"
    ids = "<think></think>\nP-1077 may hold 3 books."
    titles = "<think></think>\nNineteen Eighty-Four, To Kill a Mockingbird and The Name of the Rose."
    traj, backend, _ = _run(holds, [call_text("get_patron", {"patron_id": "P-1077"}), ids, titles])
    made = [(s.call.name, s.call.arguments) for s in call_steps(traj.turns)]
    assert made == [("get_patron", {"patron_id": "P-1077"})] + [
        ("get_book", {"book_id": b}) for b in ("BK-001", "BK-020", "BK-033")]
    assert all(t.instead for t in traj.turns if t.calls and t.calls[0].call.name == "get_book")
    assert traj.final_answer == titles.split("\n", 1)[1] and len(backend.prompts) == 3  # no model for the reads


def test_the_listed_ids_are_read_past_the_last_step():
    """The actor spent its one step on the patron: the engine's reads of the titles are its own
    steps, made past the last, before the actor answers again."""
    holds = "Which books does library card P-1077 currently have on hold? Titles, please."
    ids = "<think></think>\nP-1077 may hold 3 books."
    titles = "<think></think>\nNineteen Eighty-Four, To Kill a Mockingbird and The Name of the Rose."
    traj, _, _ = _run(holds, [call_text("get_patron", {"patron_id": "P-1077"}), ids, titles], max_steps=1)
    assert [s.call.name for s in call_steps(traj.turns)] == ["get_patron"] + ["get_book"] * 3
    assert traj.final_answer == titles.split("\n", 1)[1]


def test_an_id_alone_does_not_tell_a_listed_item_a_read_named():
    reads = _reads("library", [("get_patron", {"patron_id": "P-1100"}), ("get_book", {"book_id": "BK-005"})])
    holding = "What is Priya Nair holding at the moment? Her card is P-1100."
    assert missed(holding, reads, "Hold placed on Priya Nair (BK-005) for P-1100.") == ["BK-005 (Dune)"]
    assert missed(holding, reads, "She is holding Dune.") == []


def test_a_superlative_asks_for_the_row_at_that_end_of_a_whole_list():
    science = _reads("library", [("list_books", {"genre": "science"})])
    oldest = "What's the oldest book you have in the science section?"
    assert missed(oldest, science, "A Brief History of Time.") == ["On the Origin of Species"]
    assert missed(oldest, science, "On the Origin of Species, from 1859.") == []
    history = _reads("bank", [("list_transactions", {"account_id": "ACC-1001"})])
    biggest = "Looking at ACC-1001, who received the biggest payment from it recently?"
    assert missed(biggest, history, "ACC-1001 has 1250.00 USD.") == ["Rent - Harbor Property Mgmt"]
    # Ten of 41 books shown: the newest of those is not the newest in the catalog, so nothing is asked.
    catalog = _reads("library", [("list_books", {})])
    assert catalog[0][1]["total"] > len(catalog[0][1]["books"])
    assert missed("What is the newest book in your catalog?", catalog, "Dune.") == []
    # "the least" ranks as "the smallest" does; "at least" ranks nothing.
    budget = _reads("files", [("read_file", {"path": "/projects/budget.csv"})])
    least = "In my budget spreadsheet, which month did I spend the least in, and how much was it?"
    assert missed(least, budget, "Total spending was 3285.") == ["feb"]
    assert missed(least, budget, "February: 980.") == []
    assert superlative("Send $20 if it holds at least $50.") is None


def test_the_file_a_question_names_in_a_listing_is_read_before_it_answers_again():
    """Asked what timeout is set in the system config file, the actor listed /system and answered
    the listing: config.ini, the one file the question names, is read in its place."""
    listing = "<think></think>\n/system contains: config.ini, readme.txt."
    timeout = "<think></think>\nThe timeout is 30."
    traj, _, _ = _run("what timeout is set in the system config file?",
                      [call_text("list_directory", {"path": "/system"}), listing, timeout], env_name="files")
    made = [(s.call.name, s.call.arguments["path"]) for s in call_steps(traj.turns)]
    assert made == [("list_directory", "/system"), ("read_file", "/system/config.ini")]
    assert traj.turns[1].withdrawn and traj.turns[2].instead and traj.final_answer == "The timeout is 30."


def test_asked_what_a_listing_holds_every_entry_is_the_answer():
    listing = _reads("files", [("list_directory", {"path": "/projects"}),
                               ("list_directory", {"path": "/projects/website"})])
    question = "What's in the website folder under /projects? Just the file names is fine."
    assert missed(question, listing, "/projects/website/style.css") == ["index.html, style.css"]
    assert missed(question, listing, "It holds index.html and style.css.") == []
    # The last listing is the one the question came to, not /projects before it.
    assert missed(question, listing[:1], "budget.csv") == ["budget.csv, website"]
    # Not asked what it holds: one entry told is not a miss.
    assert missed("Is there a stylesheet in /projects/website?", listing[1:], "Yes, style.css.") == []


def test_reads_of_an_identifier_the_question_does_not_name_do_not_answer_it():
    both = _reads("bank", [("get_account", {"account_id": "ACC-1003"}), ("get_account", {"account_id": "ACC-1005"})])
    question = "just tell me the current balance of ACC-1003"
    # The other account's balance, told as this one's, is not the answer.
    assert missed(question, both, "ACC-1003 has a balance of 15.50 USD.") == ["310.25"]
    assert missed(question, both, "ACC-1003 holds 310.25 USD.") == []
    # A read of another kind of identifier still answers: the books of a patron's holds.
    holds = _reads("library", [("get_patron", {"patron_id": "P-1077"}), ("get_book", {"book_id": "BK-020"})])
    assert missed("Which books does P-1077 have on hold?", holds, "Nothing.") == [
        "BK-001, BK-020 (To Kill a Mockingbird), BK-033"]


def test_a_name_the_question_gives_that_no_read_returned_is_searched_for():
    """The actor read the card and the book it holds; The Hobbit, which the question names, was
    never looked up: the catalog search (its query quotes the user) is made before it answers again."""
    question = "Is there a copy of The Hobbit on the shelf right now? If yes, just give me the shelf mark."
    patron = call_text("get_patron", {"patron_id": "P-1100"})
    dune = "<think></think>\nDune is on shelf SF HER."
    hobbit = "<think></think>\nThe Hobbit is on shelf FAN TOL."
    traj, _, _ = _run(question + " Card P-1100.", [patron, dune, hobbit, hobbit, hobbit])
    steps = call_steps(traj.turns)
    assert (steps[1].call.name, steps[1].call.arguments) == ("search_catalog", {"query": "Hobbit"})
    assert "search_catalog" in traj.turns[1].withdrawn
    # Every name read already: no search.
    found = _reads("library", [("search_catalog", {"query": "Hobbit"})])
    from envace_demo.engine.detail import unread_name
    from types import SimpleNamespace
    env = create("library")
    runner = SimpleNamespace(tools=env.tools(), writes=env.writes, committer=SimpleNamespace(quoting=lambda t: env.quoting(t.name)))
    assert unread_name(runner, question, found, set()) is None
    assert unread_name(runner, question, [], set()) == ToolCall("search_catalog", {"query": "Hobbit"})


def test_the_word_before_id_says_which_identifier_is_asked_for():
    bank = create("bank")
    move = {"from_account_id": "ACC-1002", "to_account_id": "ACC-1001", "amount": 750.0}
    done = [(ToolCall("transfer", move), bank.execute("transfer", move))]
    question = "Then tell me the transaction ID and how much more she can still transfer out of the savings account today."
    # The accounts' ids are identifiers too, and "account" is a word of the question: not what it asks.
    assert missed(question, done, "Moved 750 from ACC-1002 to ACC-1001.") == ["TX-5008"]
    assert missed(question, done, "Done: TX-5008.") == []
