"""Varied worlds for the actor's warm-start rows: each example environment with the same
entities (accounts, paths, books) and other values (balances, transactions, file
contents, shelves, copies).

Trained on the one seeded world only, a small actor learns its answers by heart: asked
for the last three transactions of an account it had seen with other limits, it wrote
amounts from memory instead of the tool's result. In a varied world the answer can only
come from the result in front of it. The rehearser's rows stay in the seeded world: its
job is to know that world.

What the scripts of ``generate.py`` rely on is kept: ids and names the requests use,
account statuses and daily limits, which paths exist and which are read-only, titles,
authors, years and genres, patrons and their holds.
"""

from __future__ import annotations

import random
from typing import Any, Callable

_OWNERS = ("Rosa Ibanez", "Kofi Mensah", "Lena Vogel", "Arjun Rao", "Sofia Russo", "Hiro Tanaka", "Nora Quinn")
_DESCRIPTIONS = (
    "Coffee - Bean There", "Payroll - Acme Corp", "Gym - FitZone", "Grocery - Green Basket", "Rent - Oak Tower",
    "Phone bill - TelNet", "Bookshop - Page One", "ATM withdrawal - Main St", "Pharmacy - CarePlus",
    "Refund - ShopRight", "Water bill - City Utilities", "Bakery - Crumbs",
)
_LINES = (
    "feed the cat", "book the dentist", "pay the water bill", "call grandma on Sunday", "fix the bike light",
    "order printer ink", "water the plants", "return the library books", "plan the team offsite",
    "send the invoice to Lars", "buy birthday cake", "clean the garage",
)


def _money(rng: random.Random, low: float, high: float) -> float:
    return round(rng.uniform(low, high), 2)


def _bank(state: dict[str, Any], rng: random.Random) -> None:
    for account_id, account in state["accounts"].items():
        # ACC-1002 keeps more than the limit scripts send (its daily limit binds first).
        account["balance"] = _money(rng, 3000, 12000) if account_id == "ACC-1002" else _money(rng, 5, 6000)
        account["owner"] = rng.choice(_OWNERS)
    for tx in state["transactions"]:
        tx["amount"] = _money(rng, 5, 2500)
        tx["description"] = rng.choice(_DESCRIPTIONS)
        tx["balance_after"] = _money(rng, 5, 9000)


def _files(state: dict[str, Any], rng: random.Random) -> None:
    for path in list(state["files"]):
        if path.endswith(".csv"):
            rows = [f"{m},{rng.randint(100, 2500)}" for m in ("jan", "feb", "mar")]
            text = "month,amount\n" + "\n".join(rows) + "\n"
        elif path.endswith(".css"):
            font = rng.choice(("serif", "monospace", "Georgia", "system-ui"))
            text = f"body {{ font-family: {font}; margin: {rng.randint(1, 4)}rem; }}\n"
        elif path.endswith(".html"):
            text = f"<!doctype html>\n<h1>{rng.choice(_LINES).capitalize()}</h1>\n"
        elif path.endswith(".ini"):
            text = f"[network]\nproxy = 10.0.{rng.randint(0, 9)}.{rng.randint(1, 254)}\ntimeout = {rng.randint(5, 90)}\n"
        else:
            text = "".join(f"- {line}\n" for line in rng.sample(_LINES, 3))
        state["files"][path] = text


def _library(state: dict[str, Any], rng: random.Random) -> None:
    for book in state["books"].values():
        book["copies"] = rng.randint(1, 4)
        book["available"] = rng.randint(0, book["copies"])
        book["shelf"] = f"{rng.randint(100, 899)} {book['author'].split()[-1][:3].upper()}"


_VARY: dict[str, Callable[[dict[str, Any], random.Random], None]] = {"bank": _bank, "files": _files, "library": _library}


def varied(env: str, seed: int) -> Callable[[dict[str, Any]], None]:
    """The change that turns ``env``'s seeded state into varied world ``seed``."""
    rng_seed = f"{env}:{seed}"

    def change(state: dict[str, Any]) -> None:
        _VARY[env](state, random.Random(rng_seed))

    return change
