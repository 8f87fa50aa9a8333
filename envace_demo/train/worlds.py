"""Varied worlds: each example environment with the same entities (accounts, paths,
books) and other values, including the values that decide a call's outcome.

Trained on the one seeded world only, a small model learns that world by heart: the
actor wrote amounts from memory instead of the tool's result, and the rehearser, asked
to withdraw $20 from an account holding $15.50 in another world, predicted success (a
lookup of its closest training call scored about as well as it did). In a varied world
an answer can only come from the result in front of the actor, and a rehearsal only from
the context in front of the rehearser: the real reads of the state a write depends on
(``Environment.context_reads``, put last in its few-shot by the engine and by
``warmstart.task_rows``).

What varies:
  - bank: balances (about a third of them low, under the amounts requests use), owners,
    which accounts are frozen and why, daily limits and what was transferred today,
    the transactions;
  - files: contents; extra directories (``/projects/reports``, ``/archive/2024``, …)
    and extra files, among them the very files the requests create or copy to (so
    "exists: ALREADY_EXISTS unless overwrite" and "missing parent: NOT_FOUND" vary); a
    few seeded files missing;
  - library: copies, copies on the shelf, shelf marks, the holds of the three patrons the
    requests name (none up to the limit; ``get_patron`` shows them) and other patrons'
    holds (the queue a new hold joins).
What stays: ids and names the requests use, which paths are read-only, titles, authors,
years and genres. The scripts of ``generate/`` read every outcome from the world they
run in.

Seeds: ``TRAIN_WORLDS`` for training rows, ``EVAL_WORLDS`` for measuring on worlds never
trained on (``bench/worlds.py``); the two never meet (``training_worlds`` refuses an
evaluation seed, tested). The actor's varied worlds are 1, 2, … (``ACTOR_WORLDS``).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any, Callable

# The seeds of the rehearser's training worlds, of the actor's, and of the worlds kept for
# measuring: disjoint (tested).
TRAIN_WORLDS = range(100, 140)
ACTOR_WORLDS = range(1, 11)
EVAL_WORLDS = range(1000, 1020)

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
_FREEZE_REASONS = ("suspected_fraud", "lost_card", "stolen_card", "customer_request", "court_order", "unpaid_fees")
_LIMITS = (250.0, 500.0, 1000.0, 1500.0, 2000.0, 3000.0, 5000.0)
# Directories the requests write into that the seeded world lacks.
EXTRA_DIRS = ("/projects/reports", "/archive/2024", "/notes/travel", "/projects/old", "/archive/2023",
              "/notes/drafts")
# Files the requests create, copy or move to (absent from the seeded world), and others.
TARGET_FILES = (
    "/notes/ideas.txt", "/archive/old.txt", "/projects/plan.md", "/notes/call.txt", "/projects/website/about.html",
    "/archive/todo-copy.txt", "/archive/index.html", "/archive/meeting-notes.md", "/notes/readme-copy.txt",
    "/notes/config-backup.ini", "/archive/budget.csv", "/projects/style.css", "/archive/todo.txt",
    "/notes/shopping.txt", "/projects/roadmap.md", "/archive/notes-2024.txt", "/projects/reports/q1.txt",
    "/archive/2024/summary.txt", "/notes/travel/packing.txt", "/projects/old/v1.txt", "/archive/2023/budget.csv",
    "/notes/drafts/todo.txt", "/projects/website/contact.html", "/notes/groceries.txt",
)
_OTHER_FILES = ("/notes/recipes.txt", "/projects/ideas.md", "/archive/2019-taxes.txt", "/notes/books-to-read.txt",
                "/projects/website/logo.txt", "/archive/letters.txt")
# Seeded files a world may lack (never under /system: the read-only rule stays the path's).
_MAY_LACK = ("/notes/todo.txt", "/notes/meeting-2025-03-10.md", "/projects/budget.csv",
             "/projects/website/index.html", "/projects/website/style.css")
_NAMED_PATRONS = ("P-1042", "P-1077", "P-1100")


def _money(rng: random.Random, low: float, high: float) -> float:
    return round(rng.uniform(low, high), 2)


def _bank(state: dict[str, Any], rng: random.Random) -> None:
    for account in state["accounts"].values():
        tier = rng.random()
        if tier < 0.3:  # low: under the amounts requests use
            account["balance"] = _money(rng, 0.5, 120)
        elif tier < 0.6:
            account["balance"] = _money(rng, 120, 1500)
        else:
            account["balance"] = _money(rng, 1500, 12000)
        account["owner"] = rng.choice(_OWNERS)
        frozen = rng.random() < 0.2
        account["status"] = "frozen" if frozen else "active"
        account["freeze_reason"] = rng.choice(_FREEZE_REASONS) if frozen else None
        limit = rng.choice(_LIMITS)
        account["daily_transfer_limit"] = limit
        spent = rng.random()
        account["transferred_today"] = 0.0 if spent < 0.5 else round(limit * rng.choice((0.2, 0.5, 0.8, 0.95)), 2)
    for tx in state["transactions"]:
        tx["amount"] = _money(rng, 5, 2500)
        tx["description"] = rng.choice(_DESCRIPTIONS)
        tx["balance_after"] = _money(rng, 5, 9000)


def _text(path: str, rng: random.Random) -> str:
    if path.endswith(".csv"):
        rows = [f"{m},{rng.randint(100, 2500)}" for m in ("jan", "feb", "mar")]
        return "month,amount\n" + "\n".join(rows) + "\n"
    if path.endswith(".css"):
        font = rng.choice(("serif", "monospace", "Georgia", "system-ui"))
        return f"body {{ font-family: {font}; margin: {rng.randint(1, 4)}rem; }}\n"
    if path.endswith(".html"):
        return f"<!doctype html>\n<h1>{rng.choice(_LINES).capitalize()}</h1>\n"
    if path.endswith(".ini"):
        return f"[network]\nproxy = 10.0.{rng.randint(0, 9)}.{rng.randint(1, 254)}\ntimeout = {rng.randint(5, 90)}\n"
    return "".join(f"- {line}\n" for line in rng.sample(_LINES, rng.randint(1, 3)))


def _files(state: dict[str, Any], rng: random.Random) -> None:
    files, dirs = state["files"], state["dirs"]
    for path in list(files):
        if not path.startswith("/system/"):
            files[path] = _text(path, rng)
    for path in _MAY_LACK:
        if rng.random() < 0.15:
            del files[path]
    for path in EXTRA_DIRS:
        if rng.random() < 0.4:
            dirs.add(path)
    for path in TARGET_FILES:
        parent = path.rsplit("/", 1)[0] or "/"
        if parent in dirs and rng.random() < 0.3:
            files[path] = _text(path, rng)
    for path in _OTHER_FILES:
        if rng.random() < 0.3:
            files[path] = _text(path, rng)


def _library(state: dict[str, Any], rng: random.Random) -> None:
    books = state["books"]
    for book in books.values():
        book["copies"] = rng.randint(1, 4)
        book["available"] = rng.randint(0, book["copies"])
        book["shelf"] = f"{rng.randint(100, 899)} {book['author'].split()[-1][:3].upper()}"
    # The named patrons' holds (get_patron shows them): from none to the limit, drawn mostly
    # among the books the requests hold for them, so a hold already placed is common too.
    ids = sorted(books)
    held = sorted({b for p in _NAMED_PATRONS for b in state["patrons"][p]["holds"]})  # the seeded world's
    for patron in _NAMED_PATRONS:
        pool = held + rng.sample(ids, 4)
        state["patrons"][patron]["holds"] = list(dict.fromkeys(rng.sample(pool, rng.randint(0, 3))))
    # Other patrons' holds: the queue a new hold joins (get_book's "holds" shows it).
    for k in range(rng.randint(2, 6)):
        patron = f"P-{2000 + rng.randint(0, 899)}"
        if patron not in state["patrons"] and patron not in _NAMED_PATRONS:
            state["patrons"][patron] = {"name": rng.choice(_OWNERS), "holds": rng.sample(ids, rng.randint(1, 3))}


_VARY: dict[str, Callable[[dict[str, Any], random.Random], None]] = {"bank": _bank, "files": _files, "library": _library}


def varied(env: str, seed: int) -> Callable[[dict[str, Any]], None]:
    """The change that turns ``env``'s seeded state into varied world ``seed``."""
    rng_seed = f"{env}:{seed}"

    def change(state: dict[str, Any]) -> None:
        _VARY[env](state, random.Random(rng_seed))

    return change


def training_worlds(seeds: Iterable[int]) -> list[int]:
    """``seeds`` as a list, refused if one is kept for evaluation (``EVAL_WORLDS``)."""
    out = list(seeds)
    kept = sorted(set(out) & set(EVAL_WORLDS))
    if kept:
        raise ValueError(f"world seeds {kept} are kept for evaluation (EVAL_WORLDS); train on TRAIN_WORLDS")
    return out


def rehearser_worlds(count: int) -> list[int]:
    """The first ``count`` of ``TRAIN_WORLDS`` (at most all of them)."""
    if count > len(TRAIN_WORLDS):
        raise ValueError(f"at most {len(TRAIN_WORLDS)} rehearser worlds (TRAIN_WORLDS), not {count}")
    return training_worlds(TRAIN_WORLDS[:count])
