from envace_demo.fidelity import fidelity, mean_fidelity, similarity


def test_identical_responses_score_one():
    value = {"balance": 310.25, "owner": "Ben", "tags": ["a", "b"], "nested": {"ok": True}}
    assert fidelity(value, value) == 1.0


def test_missing_side_gives_none():
    assert fidelity(None, {"a": 1}) is None
    assert fidelity({"a": 1}, None) is None


def test_structure_counts_keys_on_both_sides():
    # one shared key right, one key only predicted, one key only real: 1/3
    assert fidelity({"a": 1, "b": 2}, {"a": 1, "c": 3}) == round(1 / 3, 4)


def test_error_predicted_for_success_scores_zero():
    assert fidelity({"error": {"code": "NOT_FOUND"}}, {"balance": 10.0}) == 0.0


def test_values_earn_partial_credit_and_order():
    exact = similarity({"balance": 100.0}, {"balance": 100.0})
    close = similarity({"balance": 99.0}, {"balance": 100.0})
    far = similarity({"balance": 1.0}, {"balance": 100.0})
    assert exact > close > far >= 0.0
    assert similarity("Alice  Moreno", "alice moreno") == 1.0
    assert 0 < similarity("Alice Moreno", "Alice Morena") < 1


def test_lists_compare_by_position_over_longer_length():
    assert similarity([1, 2], [1, 2, 3]) == round(2 / 3, 10) or abs(similarity([1, 2], [1, 2, 3]) - 2 / 3) < 1e-9
    assert similarity([], []) == 1.0


def test_bool_is_not_a_number():
    assert similarity(True, 1) == 0.0


def test_scores_stay_in_unit_interval_and_deep_nesting_is_bounded():
    deep_a = deep_b = 1
    for _ in range(200):
        deep_a, deep_b = {"x": deep_a}, {"x": deep_b}
    assert fidelity(deep_a, deep_b) == 1.0
    assert 0.0 <= fidelity({"a": [1, {"b": "x"}]}, {"a": [2, {"b": "y"}], "c": None}) <= 1.0


def test_mean_ignores_missing():
    assert mean_fidelity([1.0, None, 0.5]) == 0.75
    assert mean_fidelity([None]) is None


def test_a_rehearsed_call_error_matches_the_environments_error_of_the_same_code():
    from envace_demo.fidelity import fidelity

    rehearsed = {"error_tool_call": {"code": "INVALID_PARAMETERS", "message": "x: bad", "details": {"errors": ["x"]}}}
    same = {"error": {"code": "INVALID_PARAMETERS", "message": "x: bad"}}
    other = {"error": {"code": "ACCOUNT_NOT_FOUND", "message": "x: bad"}}
    assert fidelity(rehearsed, same) == 1.0
    assert fidelity(rehearsed, other) < fidelity(rehearsed, same)
    assert fidelity(rehearsed, {"balance": 1.0}) == 0.0
