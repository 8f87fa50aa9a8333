import pytest

from envace_demo.fidelity import (
    Context,
    Score,
    error_right,
    fidelity,
    mean_fidelity,
    outcome,
    same_value,
    score,
    summarize_parts,
)

BALANCE = {"account_id": "ACC-1003", "owner": "Ben Okafor", "balance": 310.25, "currency": "USD"}
FUNDS = {"error": {"code": "INSUFFICIENT_FUNDS", "message": "ACC-1003 has 310.25, needs 500.00"}}
CUT = {"error": {"code": "REHEARSAL_FAILED", "message": "time ran out before the result was closed"}}


def test_identical_responses_score_one():
    value = {"balance": 310.25, "owner": "Ben", "tags": ["a", "b"], "nested": {"ok": True}}
    assert fidelity(value, value) == 1.0
    assert score(value, value) == Score(True, None, 1.0, 1.0)


def test_no_real_response_gives_none_and_a_missing_rehearsal_is_a_miss():
    assert fidelity({"a": 1}, None) is None
    assert fidelity(None, {"a": 1}) == 0.0
    s = score(None, {"a": 1})
    assert (s.outcome_right, s.missed, s.value) == (False, True, 0.0)
    with pytest.raises(ValueError):
        score({"a": 1}, None)


def test_a_cut_or_unparsable_rehearsal_is_a_miss_not_left_out():
    assert fidelity(CUT, BALANCE) == 0.0
    s = score(CUT, BALANCE)
    assert s.outcome_right is False and s.missed
    assert (s.unknowable, s.value) == (0.0, 0.0)


def test_outcome_is_success_or_the_error_code():
    assert outcome(BALANCE) == "success"
    assert outcome(FUNDS) == "INSUFFICIENT_FUNDS"
    call_error = {"error_tool_call": {"code": "INVALID_PARAMETERS", "message": "x"}}
    assert outcome(call_error) == "INVALID_PARAMETERS"
    assert outcome({"error": {"message": "no code"}}) == "ERROR"
    assert outcome([1, 2]) == "success"
    assert outcome(None) == "missing"


def test_success_predicted_for_a_failure_is_a_wrong_outcome():
    s = score(BALANCE, FUNDS, Context(arguments={"account_id": "ACC-1003"}))
    assert s.outcome_right is False and not s.missed
    assert s.value == 0.0 and s.unknowable == 0.0  # the message leaf exists, and is not right
    assert fidelity(BALANCE, FUNDS) == 0.0
    assert fidelity({"error": {"code": "NOT_FOUND"}}, {"balance": 10.0}) == 0.0


def test_same_error_code_is_the_outcome_right_and_the_message_is_the_value():
    rehearsed = {"error": {"code": "INSUFFICIENT_FUNDS", "message": "not enough money"}}
    s = score(rehearsed, FUNDS)
    assert s.outcome_right and s.value == 0.0  # the code is not scored twice; the message is wrong
    assert fidelity(rehearsed, FUNDS) == 0.5
    assert fidelity(FUNDS, FUNDS) == 1.0
    other = {"error": {"code": "ACCOUNT_FROZEN", "message": FUNDS["error"]["message"]}}
    assert fidelity(other, FUNDS) == 0.0


def test_a_rehearsed_call_error_matches_the_environments_error_of_the_same_code():
    details = {"errors": ["x"]}
    rehearsed = {"error_tool_call": {"code": "INVALID_PARAMETERS", "message": "x: bad", "details": details}}
    same = {"error": {"code": "INVALID_PARAMETERS", "message": "x: bad"}}
    other = {"error": {"code": "ACCOUNT_NOT_FOUND", "message": "x: bad"}}
    assert fidelity(rehearsed, same) == 1.0
    assert fidelity(rehearsed, other) == 0.0
    assert fidelity(rehearsed, {"balance": 1.0}) == 0.0


def test_invented_values_score_zero_on_those_leaves():
    invented = {**BALANCE, "owner": "Alice Moreno", "balance": 1250.0}
    s = score(invented, BALANCE)
    assert s.outcome_right
    assert s.value == 0.5  # account_id and currency right, owner and balance invented
    assert fidelity(invented, BALANCE) == 0.75
    close = {**BALANCE, "balance": 310.26}
    assert score(close, BALANCE).value == 0.75  # no credit for close numbers


def test_echoing_the_arguments_earns_the_knowable_leaves_only():
    arguments = {"account_id": "ACC-1003"}
    s = score(dict(arguments), BALANCE, Context(arguments=arguments))
    assert s.outcome_right
    assert s.knowable == 1.0  # the account id, echoed back
    assert s.unknowable == 0.0  # owner, balance, currency were never shown
    assert s.value == 0.25


def test_known_results_make_their_values_knowable():
    shown = {"accounts": [{"account_id": "ACC-1003", "owner": "Ben Okafor", "balance": 310.25}]}
    context = Context(arguments={"account_id": "ACC-1003"}, known=(shown,))
    rehearsed = {"account_id": "ACC-1003", "owner": "Ben Okafor", "balance": 300.0, "currency": "EUR"}
    s = score(rehearsed, BALANCE, context)
    assert s.knowable == pytest.approx(2 / 3)  # id and owner right, the shown balance missed
    assert s.unknowable == 0.0  # the currency was never shown
    described = Context(context.arguments, known=(shown,), description="Balances are in USD.")
    assert score(rehearsed, BALANCE, described).unknowable is None  # now every leaf was shown


def test_knowable_values_are_normalized_and_the_description_counts_by_whole_word():
    knowable = Context(
        arguments={"name": "  Ben   OKAFOR ", "limit": 2},
        description="Transfers above 1,000.50 need approval; statuses: active, frozen.",
    ).knowable()
    assert knowable.holds("ben okafor")
    assert knowable.holds(2.0) and knowable.holds(1000.5)
    assert knowable.holds("Frozen")
    assert not knowable.holds("act")  # a piece of a word is not shown
    assert not knowable.holds(True) and not knowable.holds(None) and not knowable.holds("")


def test_values_are_compared_strictly():
    assert same_value("Alice  Moreno", "alice moreno")
    assert not same_value("Alice Moreno", "Alice Morena")
    assert same_value(100, 100.0) and same_value(0.1 + 0.2, 0.3)
    assert not same_value(99.0, 100.0)
    assert not same_value(True, 1) and not same_value("1", 1)
    assert same_value(None, None) and same_value([], []) and not same_value([], {})


def test_lists_compare_by_position_and_missing_elements_are_wrong():
    assert score([1, 2], [1, 2, 3]).value == pytest.approx(2 / 3)
    assert score([2, 1], [1, 2]).value == 0.0
    assert fidelity([], []) == 1.0
    assert score([{"id": 1}], []).value == 0.0  # the real "no results" is a leaf of its own


def test_keys_only_the_rehearsal_has_are_not_scored():
    assert fidelity({"a": 1, "b": 2}, {"a": 1}) == 1.0
    assert fidelity({"a": 1}, {"a": 1, "c": 3}) == 0.75


def test_scores_stay_in_unit_interval_and_deep_nesting_is_bounded():
    deep_a = deep_b = 1
    for _ in range(200):
        deep_a, deep_b = {"x": deep_a}, {"x": deep_b}
    assert fidelity(deep_a, deep_b) == 1.0
    assert 0.5 <= fidelity({"a": [1, {"b": "x"}]}, {"a": [2, {"b": "y"}], "c": None}) <= 1.0


def test_mean_ignores_missing():
    assert mean_fidelity([1.0, None, 0.5]) == 0.75
    assert mean_fidelity([None]) is None


def test_summarize_parts_averages_per_call():
    context = Context(arguments={"account_id": "ACC-1003"})
    scores = [
        score(BALANCE, BALANCE, context),  # all right
        score({"account_id": "ACC-1003"}, BALANCE, context),  # echo: knowable right only
        score(BALANCE, FUNDS, context),  # wrong outcome
        score(None, BALANCE, context),  # a miss
    ]
    parts = summarize_parts(scores)
    assert parts == {
        "calls": 4,
        "outcome": 0.5,
        "missed": 1,
        "knowable": 0.667,  # over the calls with knowable leaves: 1, 1, 0 (the miss); FUNDS has none
        "unknowable": 0.25,  # 1, 0, 0, 0
        "value": 0.312,  # (1 + 0.25 + 0 + 0) / 4
    }
    empty = summarize_parts([])
    assert empty["calls"] == 0 and empty["outcome"] is None and empty["value"] is None


def test_error_or_not_is_right_whichever_the_error_and_a_miss_is_wrong():
    limit = {"error": {"code": "DAILY_LIMIT_EXCEEDED", "message": "over the limit"}}
    assert error_right(limit, FUNDS) and not score(limit, FUNDS).outcome_right  # another error: still an error
    assert error_right(BALANCE, {"balance": 1.0}) and error_right(FUNDS, FUNDS)
    assert not error_right(BALANCE, FUNDS) and not error_right(FUNDS, BALANCE)
    assert not error_right(CUT, FUNDS) and not error_right(None, FUNDS)  # no usable rehearsal
