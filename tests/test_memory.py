from envace_demo.memory import summarize
from envace_demo.record import Action, CallStep, Rehearsal, ToolCall, Turn


def _rehearsal(index, calls_and_results, answer=None, error=None):
    turns = []
    for i, (name, args, result) in enumerate(calls_and_results):
        turns.append(Turn(index=i, action=Action(text="t"), calls=[CallStep(ToolCall(name, args), rehearsed=result, valid=True)]))
    if error:
        turns.append(Turn(index=len(turns), action=Action(text="x", error="JSON_DECODE_ERROR"), error=error))
    return Rehearsal(index=index, turns=turns, final_answer=answer, ended="answer" if answer else "parse_error")


def test_memory_lists_attempts_calls_predictions_errors_and_answers():
    mem = summarize([
        _rehearsal(0, [("get_account", {"account_id": "ACC-1"}, {"balance": 10})], answer="You have $10."),
        _rehearsal(1, [("withdraw", {"account_id": "ACC-1", "amount": 50}, {"error": {"code": "INSUFFICIENT_FUNDS"}})],
                   error="JSON_DECODE_ERROR: bad"),
    ])
    assert [a["index"] for a in mem["attempts"]] == [0, 1]
    first, second = mem["attempts"]
    assert first["calls"][0]["predicted"] == {"balance": 10} and not first["calls"][0]["predicted_error"]
    assert second["calls"][0]["predicted_error"] is True
    assert second["errors"] == ["JSON_DECODE_ERROR: bad"]
    text = mem["text"]
    assert "Attempt 1:" in text and "Attempt 2:" in text
    assert 'called get_account {"account_id": "ACC-1"}' in text
    assert "(predicted error)" in text and "You have $10." in text
    assert "predicted, not real" in text


def test_empty_memory_has_no_text():
    assert summarize([])["text"] == ""


def test_long_predictions_are_truncated():
    mem = summarize([_rehearsal(0, [("f", {}, {"blob": "x" * 5000})])])
    assert len(mem["text"]) < 1000


def test_a_call_repeated_in_a_row_is_written_once_with_its_count():
    same = ("list_transactions", {"account_id": "ACC-1"}, {"transactions": []})
    text = summarize([_rehearsal(0, [same, same, same, ("get_account", {"account_id": "ACC-1"}, {"balance": 1})])])["text"]
    assert text.count("called list_transactions") == 1 and "(3 times in a row)" in text
    assert text.count("called get_account") == 1


def test_a_rehearsal_cut_by_its_time_still_feeds_the_memory_marked_cut():
    done = _rehearsal(0, [("get_account", {"account_id": "ACC-1"}, {"balance": 10})])
    cut = Rehearsal(index=1, ended="rehearsal_time", cut=True, turns=[
        Turn(index=0, action=Action(text="t"), calls=[CallStep(ToolCall("get_account", {"account_id": "ACC-1"}),
                                                              rehearsed={"balance": 10}, valid=True)]),
        Turn(index=1, action=Action(text="t"), calls=[CallStep(
            ToolCall("list_transactions", {"account_id": "ACC-1"}), valid=True, rehearsal_cut=True,
            error="the rehearsal time ran out before the rehearsal")]),
    ])
    mem = summarize([done, cut])
    first, second = mem["attempts"]
    assert not first["cut"] and second["cut"] and second["calls"][1]["cut"]
    assert second["errors"] == []  # said on the call's line and in the heading, once each
    text = mem["text"]
    assert "Attempt 2 (cut short: the rehearsal time ran out):" in text
    assert 'called list_transactions {"account_id": "ACC-1"} -> not rehearsed (the time ran out)' in text
    assert 'called get_account {"account_id": "ACC-1"} -> {"balance": 10}' in text.split("Attempt 2")[1]


def _step(rehearsed, real, fidelity=None):
    return CallStep(ToolCall("transfer", {"amount": 1500}), rehearsed=rehearsed, real=real, fidelity=fidelity)


def test_a_real_response_contradicts_its_rehearsal_by_outcome_or_by_a_low_fidelity():
    from envace_demo.memory import contradiction

    refused = {"error": {"code": "DAILY_LIMIT_EXCEEDED", "message": "over the limit"}}
    done = {"transaction_id": "TX-1", "amount": 1500}
    assert "DAILY_LIMIT_EXCEEDED" in contradiction(_step(done, refused, 0.0), 0.5)
    assert "succeeded" in contradiction(_step(refused, done, 0.0), 0.5)
    assert "0.30" in contradiction(_step(done, {**done, "amount": 1}, 0.3), 0.5)
    assert contradiction(_step(done, done, 0.9), 0.5) is None
    assert contradiction(_step(done, refused, 0.0), None) is None  # the floor off: never
    assert contradiction(_step(None, refused), 0.5) is None  # nothing was rehearsed


def test_a_read_fetched_for_real_is_said_real_not_predicted():
    from envace_demo.memory import render

    fetched = CallStep(ToolCall("get_account", {"account_id": "ACC-1"}), real={"balance": 10}, valid=True, fetched=True)
    failed = CallStep(ToolCall("get_book", {"book_id": "BK-9"}), real={"error": {"code": "NOT_FOUND"}}, valid=True,
                      fetched=True)
    turns = [Turn(index=0, action=Action(text="t"), calls=[fetched]), Turn(index=1, action=Action(text="t"), calls=[failed])]
    mem = summarize([Rehearsal(index=0, turns=turns, ended="first_write")])
    read, missing = mem["attempts"][0]["calls"]
    assert read["predicted"] == {"balance": 10} and read["fetched"] and not read["predicted_error"]
    assert missing["predicted_error"] is True
    outcomes = render(mem["attempts"], values=False)
    assert "-> real success" in outcomes and "-> real error NOT_FOUND" in outcomes and "predicted success" not in outcomes
    assert '{"balance": 10} (real)' in mem["text"] and "(real error)" in mem["text"]
