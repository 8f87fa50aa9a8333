"""The rehearser's certainty of its outcome: the probability of the token where it chose
between success and failure (hand-made generations: one token per character)."""

from helpers.scripted import sure
from envace_demo.certainty import decision_points, outcome_certainty
from envace_demo.models.base import Generation

FACTS = ('<think>\nACC-1005: active, balance 15.5; amount 40. Outcome: INSUFFICIENT_FUNDS.\n</think>\n\n'
         '<execution_result>\n{"error": {"code": "INSUFFICIENT_FUNDS", "message": "too little"}}\n</execution_result>')
PLAIN = '<think>\n</think>\n\n<execution_result>\n{"transaction_id": "TX-1", "amount": 40}\n</execution_result>'


def _with(text: str, low: dict[int, float]) -> Generation:
    """``text``, one token per character, probability 1 but at ``low``'s offsets."""
    gen = sure(text, 1.0)
    for at, p in low.items():
        gen.token_probs[at] = p
    return gen


def test_the_decision_is_where_the_thought_says_the_outcome_and_where_the_result_opens():
    said, key = decision_points(FACTS)
    assert FACTS[said:].startswith("INSUFFICIENT_FUNDS.") and FACTS[key:].startswith('error"')
    (key,) = decision_points(PLAIN)  # no thought of facts: the result's first key alone
    assert PLAIN[key:].startswith('transaction_id"')
    assert decision_points("<think>unfinished") == []


def test_certainty_is_the_lower_probability_at_the_decision_tokens():
    said, key = decision_points(FACTS)
    assert outcome_certainty(_with(FACTS, {said: 0.62, key: 0.99})) == 0.62
    assert outcome_certainty(_with(FACTS, {said: 0.97, key: 0.4})) == 0.4
    # A token elsewhere (an invented balance) does not count.
    assert outcome_certainty(_with(FACTS, {said + 30: 0.01})) == 1.0


def test_a_token_spanning_the_decision_character_carries_it():
    # Three tokens: up to the code, the code's first two characters, the rest.
    said = FACTS.index("INSUFFICIENT")
    gen = Generation(FACTS, 3, 10, 0.0, token_probs=[1.0, 0.7, 1.0], token_ends=[said, said + 2, len(FACTS)])
    assert outcome_certainty(gen) == 0.7


def test_no_certainty_without_probabilities_or_an_outcome():
    assert outcome_certainty(Generation(FACTS, 10, 10, 0.0)) is None  # a batch or a chat server
    assert outcome_certainty(sure("<think>no result yet", 0.9)) is None
    broken = sure(FACTS, 0.9)
    broken.token_ends.pop()
    assert outcome_certainty(broken) is None
