"""How sure the rehearser was of the outcome it predicted: the probability it gave the
token where it chose between success and failure.

A rehearsal that foresees a failure holds the call. Whether the engine may then trust it
(the actor's refusal stands, and no failing write runs) depends on how sure the model was.
So does whether it must check it by running the call anyway. The shipped 135M rehearser
was right on 8 of the 9 failures it gave 0.9 or more, and on 10 of the 15 it gave less
(bench/RESULTS.md, "A failure the rehearser was sure of is trusted").

The decision is made where the rehearsal first says its outcome:
- the outcome its reasoning states (``OUTCOME_SAID``: the embedded rehearser's thought
  ends "… Outcome: ACCOUNT_FROZEN.");
- the first key of the result object (``"error"`` or the first key of a success).
The certainty is the lower of the two probabilities. A generation whose decoder reports
no probabilities (a batch, a chat server) has none, and nothing is trusted on it.
"""

from __future__ import annotations

from bisect import bisect_right

from envace_demo.calls import RESULT_OPEN
from envace_demo.models.base import Generation

OUTCOME_SAID = "Outcome: "  # where a facts thought states its outcome: the rehearsal's decision


def decision_points(text: str) -> list[int]:
    """Where in ``text`` (character offsets) a rehearsal says its outcome: the first
    character of the outcome its reasoning states, and of the result object's first key."""
    points = []
    opened = text.find(RESULT_OPEN)
    said = text.find(OUTCOME_SAID, 0, opened if opened != -1 else len(text))
    if said != -1:
        at = said + len(OUTCOME_SAID)
        while at < len(text) and text[at].isspace():
            at += 1
        if at < len(text):
            points.append(at)
    if opened != -1:
        brace = text.find("{", opened + len(RESULT_OPEN))
        quote = text.find('"', brace + 1) if brace != -1 else -1
        if quote != -1 and quote + 1 < len(text):
            points.append(quote + 1)
    return points


def outcome_certainty(gen: Generation) -> float | None:
    """The probability the rehearser gave its outcome where it chose it (the lower one where
    it says it twice), or None where the decoder reported no probabilities or the text
    says no outcome."""
    if not gen.token_probs or len(gen.token_ends) != len(gen.token_probs):
        return None
    found = []
    for point in decision_points(gen.text):
        k = bisect_right(gen.token_ends, point)  # the token whose text holds character ``point``
        if k < len(gen.token_probs):
            found.append(gen.token_probs[k])
    return round(min(found), 4) if found else None
