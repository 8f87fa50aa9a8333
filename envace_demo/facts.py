"""The facts of the state a call's outcome depends on, taken from the real reads in the
rehearser's context, then the outcome they decide: the embedded rehearser's reasoning, as a
training target (``deciding_facts``) and, stated by the engine, as the start of its reasoning
at run time (``stated_facts``).

A 135M-parameter rehearser trained to answer a write straight away learnt which outcome is
usual, not which one the state shown decides: the reads in its context did not move its
odds of an error (bench/RESULTS.md). Writing the deciding facts first turns that into
copying (a balance, a status, whether a name is in a listing) next to the call's own
arguments, then one short step from those facts to the outcome, the kind of reasoning the
prompt contract asks the rehearser for (``<think>`` before ``<execution_result>``).

Only facts that the row's prompt shows are written: each comes from a read in the
few-shot (``shown``) or from the call's arguments. No read shown, no facts (``None``: the
empty reasoning block).
"""

from __future__ import annotations

import json
import posixpath
import re
from typing import Any, Callable

from envace_demo.certainty import OUTCOME_SAID
from envace_demo.fidelity import outcome
from envace_demo.record import ToolCall, error_code, is_error

# Longest reasoning the rows hold (characters): the bound an adapter trained on them is
# served with (``models.adapters.write_reasoning``).
MAX_FACTS_CHARS = 220


def _value(value: Any) -> str:
    """A value as the JSON in the context writes it, so the facts copy it verbatim."""
    return json.dumps(value, ensure_ascii=False)


def _reads(shown: list[tuple[ToolCall, Any]], tool: str, key: str) -> dict[str, Any]:
    """``tool``'s results in ``shown``, by the argument ``key`` they were read with."""
    out = {}
    for call, result in shown:
        if call.name == tool and isinstance(call.arguments.get(key), str):
            out[call.arguments[key].strip().upper() if key != "path" else call.arguments[key]] = result
    return out


def _bank(call: ToolCall, shown: list[tuple[ToolCall, Any]]) -> list[str]:
    accounts = _reads(shown, "get_account", "account_id")
    args = call.arguments
    keys = ("from_account_id", "to_account_id") if call.name == "transfer" else ("account_id",)
    facts, bounds = [], []
    for n, key in enumerate(keys):
        raw = args.get(key)
        account = accounts.get(raw.strip().upper()) if isinstance(raw, str) else None
        if account is None:
            continue
        if is_error(account):
            facts.append(f"{raw}: {error_code(account)}")
            continue
        fact = f"{account['account_id']}: {account['status']}, balance {_value(account['balance'])}"
        if n == 0 and call.name in ("withdraw", "transfer"):
            bounds.append(("balance", account["balance"]))
        if call.name == "transfer" and n == 0:
            left = round(account["daily_transfer_limit"] - account["transferred_today"], 2)
            fact += f", {_value(left)} left today"
            bounds.append(("left today", left))
        facts.append(fact)
    if facts and "amount" in args:
        amount = args["amount"]
        # Each number the amount must not pass, set right beside it: a 135M rehearser that
        # saw the balance earlier in its facts did not compare it with the amount.
        said = [f"vs {what} {_value(v)}: {_over(amount, v)}" for what, v in bounds]
        facts.append(f"amount {_value(amount)}" + (" " + ", ".join(said) if said else ""))
    return facts


def _over(amount: Any, bound: Any) -> str:
    """Whether ``amount`` passes ``bound``: "over" or "within"."""
    try:
        return "over" if float(amount) > float(bound) + 1e-9 else "within"
    except (TypeError, ValueError):
        return "within"


def _files(call: ToolCall, shown: list[tuple[ToolCall, Any]]) -> list[str]:
    listings = _reads(shown, "list_directory", "path")
    facts = []
    for key in ("path", "source", "destination"):
        path = call.arguments.get(key)
        if not isinstance(path, str) or not path.startswith("/"):
            continue
        parent = posixpath.dirname(path.rstrip("/") or "/")
        listing = listings.get(parent)
        if path.startswith("/system/"):
            facts.append(f"{path}: read-only")
        elif listing is None:
            continue
        elif is_error(listing):
            facts.append(f"{parent}: {error_code(listing)}")
        else:
            name = posixpath.basename(path.rstrip("/"))
            kinds = [e.get("type") for e in listing.get("entries", []) if e.get("name") == name]
            facts.append(f"{path}: {kinds[0]} exists" if kinds else f"{path}: not in {parent}")
    if facts and call.name == "write_file":
        facts.append(f"overwrite {_value(bool(call.arguments.get('overwrite', False)))}")
    return facts


def _library(call: ToolCall, shown: list[tuple[ToolCall, Any]]) -> list[str]:
    books = _reads(shown, "get_book", "book_id")
    raw = call.arguments.get("book_id")
    book = books.get(raw.strip().upper()) if isinstance(raw, str) else None
    if book is None:
        return []
    if is_error(book):
        return [f"{raw}: {error_code(book)}"]
    facts = [f"{book['book_id']}: {book['available']} of {book['copies']} copies in, {book['holds']} holds"]
    raw = call.arguments.get("patron_id")
    if not isinstance(raw, str):
        return facts
    patron = _reads(shown, "get_patron", "patron_id").get(raw.strip().upper())
    if patron is None:
        facts.append(f"patron {raw}")
    elif is_error(patron):
        facts.append(f"{raw}: {error_code(patron)}")
    else:
        # The two rules in the order the library applies them: a book held already, then
        # the limit, each settled beside the number it turns on (as the bank's amounts are).
        held = "yes" if book["book_id"] in patron["holds"] else "no"
        count, limit = len(patron["holds"]), patron["hold_limit"]
        facts.append(f"{patron['patron_id']}: holds {book['book_id']} already: {held}, "
                     f"holds {count} vs limit {limit}: {'full' if count >= limit else 'room'}")
    return facts


_FACTS: dict[str, Callable[[ToolCall, list[tuple[ToolCall, Any]]], list[str]]] = {
    "bank": _bank, "files": _files, "library": _library,
}


def deciding_facts(env: str | None, call: ToolCall, shown: list[tuple[ToolCall, Any]], result: Any) -> str | None:
    """The reasoning of a rehearser that read ``shown`` before predicting ``call`` (whose
    real response is ``result``): its deciding facts, then the outcome; ``None`` where the
    environment names no facts for the call or none of its reads is shown."""
    lead = _lead(env, call, shown)
    text = None if lead is None else f"{lead}{outcome(result)}."
    return text if text is not None and len(text) <= MAX_FACTS_CHARS else None


def _lead(env: str | None, call: ToolCall, shown: list[tuple[ToolCall, Any]]) -> str | None:
    """The facts, up to where the outcome is said."""
    facts = _FACTS.get(env or "", lambda *_: [])(call, shown)
    return "; ".join(facts) + f". {OUTCOME_SAID}" if facts else None


# The facts that break a rule the tool keeps: an amount over a balance or the day's limit, a
# frozen account, a full hold list, a book held already, a path on the read-only /system.
_BROKEN = re.compile(r": (?:over|frozen|full|read-only)\b|already: yes\b")


def breaks_rule(lead: str | None) -> bool:
    """Whether stated facts (``stated_facts``, from real reads) show a rule the call breaks."""
    return bool(lead) and bool(_BROKEN.search(lead))


def stated_tokens(lead: str | None) -> int:
    """New tokens to add to a rehearsal's budget for a stated ``lead``: the engine's text is
    not the rehearser's to pay for. One per two characters, about what the embedded tokenizer
    makes of them (each digit is a token): a transfer's facts and result passed 192 tokens."""
    return (len(lead) + 1) // 2 if lead else 0


def stated_facts(env: str | None, call: ToolCall, shown: list[tuple[ToolCall, Any]]) -> str | None:
    """The reasoning a facts-trained rehearser is held to open with before it predicts
    ``call`` (``Constraint.think_lead``): the deciding facts ``shown`` holds, as its training
    target writes them, up to where it says the outcome; the outcome and the result stay
    the rehearser's. ``None`` where no facts are named or none of their reads is shown.

    The 135M rehearser copied the wrong account's limit into its facts and judged $10 "over" a
    balance of $8,400 (bench/RESULTS.md): copying and comparing numbers is what it does worst,
    and what the reads shown already settle. Which outcome those facts make, and every value of
    the response, it still decides itself."""
    lead = _lead(env, call, shown)
    # Room for the longest outcome the environments name after it, as in training.
    return lead if lead is not None and len(lead) + len("INSUFFICIENT_FUNDS.") <= MAX_FACTS_CHARS else None
