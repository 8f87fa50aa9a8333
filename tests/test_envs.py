"""The bundled environments (bank, files, library), their tools.json and tasks."""

from __future__ import annotations

import builtins
import json
import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from envace_demo.bfcl import match_call
from envace_demo.envs import registry
from envace_demo.envs.bank import BankEnvironment
from envace_demo.envs.base import Environment
from envace_demo.envs.files import FilesEnvironment
from envace_demo.envs.library import LibraryEnvironment
from envace_demo.errors import EnvironmentNotFound, TaskError
from envace_demo.schemas import load_tools

ENV_NAMES = ("bank", "files", "library")
_MISSING = object()


# ---- helpers -------------------------------------------------------------------


def _tool(env: Environment, name: str):
    (tool,) = [t for t in env.tools() if t.original_name == name]
    return tool


def ok(env: Environment, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """Run a call that must succeed; its response must fit the declared response schema."""
    response = env.execute(name, args)
    assert "error" not in response, response
    Draft202012Validator(_tool(env, name).response).validate(response)
    return response


def fails(env: Environment, name: str, args: Any, code: str) -> dict[str, Any]:
    """Run a call that must fail with ``code`` and leave the state as it was."""
    before = env.state()
    response = env.execute(name, args)
    assert set(response) == {"error"}, response
    assert response["error"]["code"] == code, response
    assert isinstance(response["error"]["message"], str) and response["error"]["message"]
    json.dumps(response)  # JSON-native
    assert env.state() == before
    return response


def resolve(state: Any, path: str | list) -> Any:
    node = state
    for key in path.split(".") if isinstance(path, str) else path:
        if not isinstance(node, dict) or key not in node:
            return _MISSING
        node = node[key]
    return node


@pytest.fixture
def bank() -> BankEnvironment:
    return BankEnvironment()


@pytest.fixture
def files() -> FilesEnvironment:
    return FilesEnvironment()


@pytest.fixture
def library() -> LibraryEnvironment:
    return LibraryEnvironment()


# ---- bank ------------------------------------------------------------------------


def test_bank_get_account(bank):
    r = ok(bank, "get_account", {"account_id": "ACC-1003"})
    assert r["balance"] == 310.25 and r["owner"] == "Ben Okafor" and r["status"] == "active"
    # The declared id shape is the contract: another spelling is a schema violation.
    assert bank.execute("get_account", {"account_id": " acc-1003 "})["error"]["code"] == "INVALID_PARAMETERS"


def test_bank_list_transactions_newest_first_and_limited(bank):
    r = ok(bank, "list_transactions", {"account_id": "ACC-1001"})
    assert [t["transaction_id"] for t in r["transactions"]] == ["TX-5007", "TX-5005", "TX-5003", "TX-5002"]
    assert len(ok(bank, "list_transactions", {"account_id": "ACC-1001", "limit": 2})["transactions"]) == 2
    assert ok(bank, "list_transactions", {"account_id": "ACC-1005"})["transactions"] == []


def test_bank_deposit_and_withdraw(bank):
    r = ok(bank, "deposit", {"account_id": "ACC-1003", "amount": 500, "description": "Birthday"})
    assert r["new_balance"] == 810.25 and r["transaction_id"] == "TX-5008"
    r = ok(bank, "withdraw", {"account_id": "ACC-1003", "amount": 10.25})
    assert r["new_balance"] == 800.0 and r["transaction_id"] == "TX-5009"
    latest = ok(bank, "list_transactions", {"account_id": "ACC-1003", "limit": 2})["transactions"]
    assert [(t["type"], t["amount"], t["balance_after"]) for t in latest] == [
        ("withdrawal", 10.25, 800.0),
        ("deposit", 500.0, 810.25),
    ]
    assert latest[1]["description"] == "Birthday"


def test_bank_withdraw_whole_balance(bank):
    assert ok(bank, "withdraw", {"account_id": "ACC-1005", "amount": 15.5})["new_balance"] == 0.0


def test_bank_transfer_moves_money_and_counts_against_limit(bank):
    r = ok(
        bank,
        "transfer",
        {"from_account_id": "ACC-1001", "to_account_id": "ACC-1002", "amount": 200, "memo": "Savings"},
    )
    assert (r["from_balance"], r["to_balance"], r["remaining_daily_limit"]) == (1050.0, 8600.0, 1800.0)
    state = bank.state()
    assert state["accounts"]["ACC-1001"]["transferred_today"] == 200.0
    assert [t["type"] for t in state["transactions"][-2:]] == ["transfer_out", "transfer_in"]
    assert state["transactions"][-1]["description"] == "Savings from ACC-1001"


def test_bank_daily_limit_accumulates(bank):
    ok(bank, "transfer", {"from_account_id": "ACC-1002", "to_account_id": "ACC-1001", "amount": 600})
    r = fails(
        bank,
        "transfer",
        {"from_account_id": "ACC-1002", "to_account_id": "ACC-1001", "amount": 600},
        "DAILY_LIMIT_EXCEEDED",
    )
    assert "400.00" in r["error"]["message"]
    ok(bank, "transfer", {"from_account_id": "ACC-1002", "to_account_id": "ACC-1001", "amount": 400})


def test_bank_freeze_blocks_money_movement(bank):
    r = ok(bank, "freeze_account", {"account_id": "ACC-1003", "reason": "stolen_card"})
    assert r == {"account_id": "ACC-1003", "status": "frozen", "reason": "stolen_card"}
    assert bank.state()["accounts"]["ACC-1003"]["freeze_reason"] == "stolen_card"
    fails(bank, "deposit", {"account_id": "ACC-1003", "amount": 5}, "ACCOUNT_FROZEN")
    fails(bank, "freeze_account", {"account_id": "ACC-1003", "reason": "lost_card"}, "ALREADY_FROZEN")


@pytest.mark.parametrize(
    ("tool", "args", "code"),
    [
        ("get_account", {"account_id": "ACC-9999"}, "ACCOUNT_NOT_FOUND"),
        ("list_transactions", {"account_id": "nope"}, "INVALID_PARAMETERS"),
        ("list_transactions", {"account_id": "ACC-0000"}, "ACCOUNT_NOT_FOUND"),
        ("deposit", {"account_id": "ACC-9999", "amount": 5}, "ACCOUNT_NOT_FOUND"),
        ("withdraw", {"account_id": "ACC-9999", "amount": 5}, "ACCOUNT_NOT_FOUND"),
        (
            "transfer",
            {"from_account_id": "ACC-1001", "to_account_id": "ACC-9999", "amount": 5},
            "ACCOUNT_NOT_FOUND",
        ),
        ("freeze_account", {"account_id": "ACC-9999", "reason": "lost_card"}, "ACCOUNT_NOT_FOUND"),
        ("withdraw", {"account_id": "ACC-1005", "amount": 400}, "INSUFFICIENT_FUNDS"),
        (
            "transfer",
            {"from_account_id": "ACC-1005", "to_account_id": "ACC-1001", "amount": 15.51},
            "INSUFFICIENT_FUNDS",
        ),
        ("deposit", {"account_id": "ACC-1001", "amount": 0}, "INVALID_AMOUNT"),
        ("deposit", {"account_id": "ACC-1001", "amount": -20}, "INVALID_AMOUNT"),
        ("withdraw", {"account_id": "ACC-1001", "amount": 1.005}, "INVALID_AMOUNT"),
        ("withdraw", {"account_id": "ACC-1001", "amount": float("nan")}, "INVALID_AMOUNT"),
        ("deposit", {"account_id": "ACC-1001", "amount": 1e308}, "INVALID_AMOUNT"),
        ("deposit", {"account_id": "ACC-1001", "amount": 1_000_000.01}, "INVALID_AMOUNT"),
        (
            "transfer",
            {"from_account_id": "ACC-1001", "to_account_id": "ACC-1002", "amount": float("inf")},
            "INVALID_AMOUNT",
        ),
        (
            "transfer",
            {"from_account_id": "ACC-1001", "to_account_id": "ACC-1002", "amount": -1},
            "INVALID_AMOUNT",
        ),
        ("withdraw", {"account_id": "ACC-1004", "amount": 100}, "ACCOUNT_FROZEN"),
        ("deposit", {"account_id": "ACC-1004", "amount": 100}, "ACCOUNT_FROZEN"),
        (
            "transfer",
            {"from_account_id": "ACC-1004", "to_account_id": "ACC-1001", "amount": 1},
            "ACCOUNT_FROZEN",
        ),
        (
            "transfer",
            {"from_account_id": "ACC-1001", "to_account_id": "ACC-1004", "amount": 1},
            "ACCOUNT_FROZEN",
        ),
        (
            "transfer",
            {"from_account_id": "ACC-1002", "to_account_id": "ACC-1001", "amount": 1000.01},
            "DAILY_LIMIT_EXCEEDED",
        ),
        (
            "transfer",
            {"from_account_id": "ACC-1001", "to_account_id": "ACC-1001", "amount": 1},
            "SAME_ACCOUNT",
        ),
        ("freeze_account", {"account_id": "ACC-1004", "reason": "lost_card"}, "ALREADY_FROZEN"),
    ],
)
def test_bank_failures(bank, tool, args, code):
    fails(bank, tool, args, code)


# ---- files -----------------------------------------------------------------------


def test_files_list_directory(files):
    r = ok(files, "list_directory", {"path": "/projects"})
    assert r["entries"] == [
        {"name": "budget.csv", "type": "file", "size": 39},
        {"name": "website", "type": "directory", "size": 0},
    ]
    assert r["truncated"] is False
    assert ok(files, "list_directory", {"path": "/archive"})["entries"] == []
    assert [e["name"] for e in ok(files, "list_directory", {"path": "/"})["entries"]] == [
        "archive",
        "notes",
        "projects",
        "system",
    ]


def test_files_list_directory_is_bounded(files):
    for i in range(60):
        ok(files, "write_file", {"path": f"/archive/f{i:02d}.txt", "content": "x"})
    r = ok(files, "list_directory", {"path": "/archive"})
    assert len(r["entries"]) == 50 and r["truncated"] is True


def test_files_read_file_normalizes_paths(files):
    r = ok(files, "read_file", {"path": "/notes/todo.txt"})
    assert "plumber" in r["content"] and r["size"] == len(r["content"].encode())
    for spelling in (
        "/notes/./todo.txt",
        "//notes//todo.txt",
        "/projects/../notes/todo.txt",
    ):
        assert ok(files, "read_file", {"path": spelling})["path"] == "/notes/todo.txt"
    ok(files, "read_file", {"path": "/system/config.ini"})  # read-only still reads


def test_files_write_file_creates_then_overwrites(files):
    assert ok(files, "write_file", {"path": "/notes/a.txt", "content": "one"})["created"] is True
    fails(files, "write_file", {"path": "/notes/a.txt", "content": "two"}, "ALREADY_EXISTS")
    r = ok(files, "write_file", {"path": "/notes/a.txt", "content": "two", "overwrite": True})
    assert r == {"path": "/notes/a.txt", "size": 3, "created": False}
    assert files.state()["files"]["/notes/a.txt"] == "two"
    assert "a.txt" in files.state()["directories"]["/notes"]


def test_files_odd_text_round_trips(files):
    for i, text in enumerate(["", "caf\u00e9 \u2603", "lone \ud800 surrogate"]):
        r = ok(files, "write_file", {"path": f"/notes/odd{i}.txt", "content": text})
        assert r["size"] == len(text.encode("utf-8", "surrogatepass"))
        assert ok(files, "read_file", {"path": f"/notes/odd{i}.txt"})["content"] == text


def test_files_create_directory(files):
    assert ok(files, "create_directory", {"path": "/projects/app"}) == {
        "path": "/projects/app",
        "created": True,
    }
    ok(files, "write_file", {"path": "/projects/app/main.py", "content": "print('hi')\n"})
    assert files.state()["directories"]["/projects/app"] == ["main.py"]


def test_files_move_file_renames_and_moves_into_directories(files):
    r = ok(files, "move_file", {"source": "/notes/todo.txt", "destination": "/notes/done.txt"})
    assert r == {"source": "/notes/todo.txt", "destination": "/notes/done.txt"}
    r = ok(files, "move_file", {"source": "/notes/done.txt", "destination": "/archive"})
    assert r["destination"] == "/archive/done.txt"
    state = files.state()["files"]
    assert "/notes/todo.txt" not in state and "/notes/done.txt" not in state
    assert "plumber" in state["/archive/done.txt"]


def test_files_delete_file(files):
    assert ok(files, "delete_file", {"path": "/projects/website/style.css"})["deleted"] is True
    assert "/projects/website/style.css" not in files.state()["files"]
    assert files.state()["directories"]["/projects/website"] == ["index.html"]


@pytest.mark.parametrize(
    ("tool", "args", "code"),
    [
        ("read_file", {"path": "/notes/missing.txt"}, "NOT_FOUND"),
        ("list_directory", {"path": "/nowhere"}, "NOT_FOUND"),
        ("write_file", {"path": "/nowhere/a.txt", "content": "x"}, "NOT_FOUND"),
        ("create_directory", {"path": "/a/b"}, "NOT_FOUND"),
        ("move_file", {"source": "/notes/missing.txt", "destination": "/archive"}, "NOT_FOUND"),
        ("move_file", {"source": "/notes/todo.txt", "destination": "/nowhere/todo.txt"}, "NOT_FOUND"),
        ("delete_file", {"path": "/notes/missing.txt"}, "NOT_FOUND"),
        ("read_file", {"path": "/notes"}, "IS_A_DIRECTORY"),
        ("read_file", {"path": "/"}, "IS_A_DIRECTORY"),
        ("write_file", {"path": "/archive", "content": "x", "overwrite": True}, "IS_A_DIRECTORY"),
        ("delete_file", {"path": "/archive"}, "IS_A_DIRECTORY"),
        ("move_file", {"source": "/projects/website", "destination": "/archive"}, "IS_A_DIRECTORY"),
        ("list_directory", {"path": "/notes/todo.txt"}, "NOT_A_DIRECTORY"),
        ("write_file", {"path": "/notes/todo.txt/x", "content": "x"}, "NOT_A_DIRECTORY"),
        ("create_directory", {"path": "/notes"}, "ALREADY_EXISTS"),
        ("create_directory", {"path": "/notes/todo.txt"}, "ALREADY_EXISTS"),
        ("write_file", {"path": "/notes/todo.txt", "content": "x"}, "ALREADY_EXISTS"),
        ("move_file", {"source": "/notes/todo.txt", "destination": "/projects/budget.csv"}, "ALREADY_EXISTS"),
        ("move_file", {"source": "/projects/budget.csv", "destination": "/projects"}, "INVALID_PATH"),
        (
            "write_file",
            {"path": "/system/config.ini", "content": "x", "overwrite": True},
            "PERMISSION_DENIED",
        ),
        ("write_file", {"path": "/system/new.txt", "content": "x"}, "PERMISSION_DENIED"),
        ("create_directory", {"path": "/system/sub"}, "PERMISSION_DENIED"),
        ("delete_file", {"path": "/system/readme.txt"}, "PERMISSION_DENIED"),
        ("move_file", {"source": "/system/readme.txt", "destination": "/archive"}, "PERMISSION_DENIED"),
        ("move_file", {"source": "/notes/todo.txt", "destination": "/system"}, "PERMISSION_DENIED"),
        ("read_file", {"path": "/../etc/passwd"}, "PATH_ESCAPES_ROOT"),
        ("read_file", {"path": "../secret.txt"}, "INVALID_PARAMETERS"),  # not absolute
        ("list_directory", {"path": "/notes/../.."}, "PATH_ESCAPES_ROOT"),
        ("write_file", {"path": "/notes/../../x.txt", "content": "x"}, "PATH_ESCAPES_ROOT"),
        ("move_file", {"source": "/notes/todo.txt", "destination": "/../todo.txt"}, "PATH_ESCAPES_ROOT"),
        ("read_file", {"path": "   "}, "INVALID_PARAMETERS"),
        ("read_file", {"path": "/notes/\x00todo.txt"}, "INVALID_PATH"),
        ("create_directory", {"path": "/" + "a" * 256}, "INVALID_PATH"),
    ],
)
def test_files_failures(files, tool, args, code):
    fails(files, tool, args, code)


def test_files_never_touch_the_real_disk(files, monkeypatch):
    files.tools()  # tools.json is read (and cached) before the disk is closed

    def refuse(*args, **kwargs):
        raise AssertionError(f"touched the real disk: {args}")

    for module, attr in [
        (builtins, "open"),
        (os, "open"),
        (os, "mkdir"),
        (os, "makedirs"),
        (os, "remove"),
        (os, "unlink"),
        (os, "rename"),
        (os, "replace"),
        (os, "rmdir"),
    ]:
        monkeypatch.setattr(module, attr, refuse)
    ok(files, "create_directory", {"path": "/tmp"})
    ok(files, "write_file", {"path": "/tmp/probe.txt", "content": "x"})
    ok(files, "move_file", {"source": "/tmp/probe.txt", "destination": "/archive"})
    ok(files, "read_file", {"path": "/archive/probe.txt"})
    ok(files, "delete_file", {"path": "/archive/probe.txt"})


# ---- library ---------------------------------------------------------------------


def test_library_catalog_is_realistic_size(library):
    books = library.state()["books"]
    assert 20 <= len(books) <= 50
    assert len({(b["title"], b["author"]) for b in books.values()}) == len(books)
    assert all(0 <= b["available"] <= b["copies"] for b in books.values())


def test_library_search_catalog(library):
    r = ok(library, "search_catalog", {"query": "ishiguro"})
    assert {b["title"] for b in r["results"]} == {"The Remains of the Day", "Never Let Me Go"}
    assert r["total"] == 2
    assert ok(library, "search_catalog", {"query": "Bronte"})["total"] == 2  # accents ignored
    assert ok(library, "search_catalog", {"query": "hitchhikers guide"})["results"][0]["book_id"] == "BK-009"
    assert ok(library, "search_catalog", {"query": "le guin darkness"})["results"][0]["book_id"] == "BK-007"
    assert ok(library, "search_catalog", {"query": "zzz unknown"}) == {
        "query": "zzz unknown",
        "total": 0,
        "results": [],
    }
    r = ok(library, "search_catalog", {"query": "the", "limit": 3})
    assert len(r["results"]) == 3 and r["total"] > 3


def test_library_list_books_filters_and_sorts(library):
    r = ok(library, "list_books", {"genre": "mystery", "available_only": True})
    assert [b["title"] for b in r["books"]] == [
        "And Then There Were None",
        "The Big Sleep",
        "The Hound of the Baskervilles",
    ]
    r = ok(library, "list_books", {"genre": "science-fiction", "year_to": 1949, "sort_by": "year"})
    assert [b["year"] for b in r["books"]] == [1932, 1949]
    r = ok(library, "list_books", {"author": "austen", "year_from": 1814})
    assert [b["title"] for b in r["books"]] == ["Emma"]
    r = ok(library, "list_books", {})
    assert r["total"] == len(library.state()["books"]) and len(r["books"]) == 10
    assert len(ok(library, "list_books", {"limit": 2})["books"]) == 2


def test_library_get_book(library):
    r = ok(library, "get_book", {"book_id": "BK-016"})
    assert (r["title"], r["shelf"], r["available"], r["holds"]) == ("Moby-Dick", "CLA MEL", 1, 0)
    assert ok(library, "get_book", {"book_id": "BK-005"})["holds"] == 1


def test_library_place_hold_queues_behind_earlier_holds(library):
    r = ok(library, "place_hold", {"book_id": "BK-005", "patron_id": "P-1042"})
    assert (r["title"], r["queue_position"], r["copies_available"]) == ("Dune", 2, 0)
    assert library.state()["patrons"]["P-1042"]["holds"] == ["BK-005"]
    assert ok(library, "get_book", {"book_id": "BK-005"})["holds"] == 2
    assert ok(library, "get_patron", {"patron_id": "P-1042"})["holds"] == ["BK-005"]


def test_library_get_patron_shows_what_a_hold_turns_on(library):
    r = ok(library, "get_patron", {"patron_id": "P-1077"})
    assert r == {"patron_id": "P-1077", "name": "Tom Becker", "holds": ["BK-001", "BK-020", "BK-033"], "hold_limit": 3}
    r["holds"].append("BK-002")  # a copy: the result never aliases the state
    assert len(library.state()["patrons"]["P-1077"]["holds"]) == 3
    assert library.context_reads("place_hold", {"book_id": "BK-037", "patron_id": "P-1077"}) == [
        ("get_book", {"book_id": "BK-037"}), ("get_patron", {"patron_id": "P-1077"})]


@pytest.mark.parametrize(
    ("tool", "args", "code"),
    [
        ("get_book", {"book_id": "BK-999"}, "BOOK_NOT_FOUND"),
        ("place_hold", {"book_id": "BK-999", "patron_id": "P-1042"}, "BOOK_NOT_FOUND"),
        ("place_hold", {"book_id": "BK-005", "patron_id": "P-0000"}, "PATRON_NOT_FOUND"),
        ("place_hold", {"book_id": "BK-005", "patron_id": "P-1100"}, "ALREADY_ON_HOLD"),
        ("place_hold", {"book_id": "BK-037", "patron_id": "P-1077"}, "HOLD_LIMIT_REACHED"),
        ("get_patron", {"patron_id": "P-0000"}, "PATRON_NOT_FOUND"),
        ("list_books", {"year_from": 1990, "year_to": 1950}, "INVALID_FILTER"),
        ("list_books", {"author": "  "}, "INVALID_FILTER"),
        ("search_catalog", {"query": "?!"}, "INVALID_QUERY"),
        ("list_books", {"genre": "poetry"}, "INVALID_PARAMETERS"),  # outside the schema's enum
    ],
)
def test_library_failures(library, tool, args, code):
    fails(library, tool, args, code)


# ---- every environment -------------------------------------------------------------

# One successful call per tool; each response must fit the tool's response schema.
EXAMPLE_CALLS: dict[str, dict[str, dict[str, Any]]] = {
    "bank": {
        "get_account": {"account_id": "ACC-1001"},
        "list_transactions": {"account_id": "ACC-1001", "limit": 10},
        "deposit": {"account_id": "ACC-1001", "amount": 20.5, "description": "Refund"},
        "withdraw": {"account_id": "ACC-1001", "amount": 40},
        "transfer": {
            "from_account_id": "ACC-1001",
            "to_account_id": "ACC-1003",
            "amount": 75.25,
            "memo": "Rent",
        },
        "freeze_account": {"account_id": "ACC-1005", "reason": "suspected_fraud"},
    },
    "files": {
        "list_directory": {"path": "/"},
        "read_file": {"path": "/projects/budget.csv"},
        "write_file": {"path": "/notes/ideas.md", "content": "# Ideas\n"},
        "create_directory": {"path": "/photos"},
        "move_file": {"source": "/notes/todo.txt", "destination": "/archive"},
        "delete_file": {"path": "/projects/website/style.css"},
    },
    "library": {
        "search_catalog": {"query": "the", "limit": 10},
        "list_books": {"genre": "classic", "sort_by": "year"},
        "get_book": {"book_id": "BK-001"},
        "place_hold": {"book_id": "BK-001", "patron_id": "P-1042"},
        "get_patron": {"patron_id": "P-1077"},
    },
}


def _walk(schema: Any):
    if isinstance(schema, dict):
        yield schema
        for value in schema.values():
            yield from _walk(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _walk(value)


@pytest.mark.parametrize("env_name", ENV_NAMES)
def test_tools_json_loads_and_matches_handlers(env_name):
    env = registry.create(env_name)
    raw = json.loads((registry.EXAMPLES_DIR / env_name / "tools.json").read_text())
    tools = load_tools(raw)
    assert [t.name for t in env.tools()] == [t.name for t in tools]
    assert 3 <= len(tools) <= 6
    # Names are API-safe as written, so the model's name and the original coincide.
    assert all(t.name == t.original_name for t in tools)
    assert {t.name for t in tools} == set(EXAMPLE_CALLS[env_name])
    for t in tools:
        assert t.response is not None, t.name
        Draft202012Validator.check_schema(t.response)
        assert t.response["type"] == "object"
        # Bounded, so a constrained rehearsal cannot run away.
        for node in _walk(t.response):
            if node.get("type") == "array":
                assert "maxItems" in node, t.name
            if node.get("type") == "string":
                assert any(k in node for k in ("maxLength", "enum", "pattern", "format")), t.name
        # Ids and paths declare their real shape, in the call and in the response alike.
        for schema in (t.parameters, t.response):
            for name, node in _named(schema):
                if name in ID_PATTERNS[env_name]:
                    assert node.get("pattern") == ID_PATTERNS[env_name][name], (t.name, name)


ID_PATTERNS = {
    "bank": {k: "^ACC-[0-9]{4}$" for k in ("account_id", "from_account_id", "to_account_id")}
    | {"transaction_id": "^TX-[0-9]{4}$"},
    "files": {k: "^/[^<>]{0,299}$" for k in ("path", "source", "destination")},
    "library": {"book_id": "^BK-[0-9]{3}$", "patron_id": "^P-[0-9]{4}$"},
}


def _named(schema):
    """(property name, schema) of every property, at any depth."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for name, sub in (node.get("properties") or {}).items():
                yield name, sub
            stack.extend(v for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend(node)


def test_seeded_ids_fit_their_declared_shapes():
    import re

    from envace_demo.envs import bank

    assert all(re.fullmatch(r"ACC-[0-9]{4}", a) for a in bank._seed()["accounts"])
    state = registry.create("library").state()
    assert state["books"] and all(re.fullmatch(r"BK-[0-9]{3}", b) for b in state["books"])
    assert state["patrons"] and all(re.fullmatch(r"P-[0-9]{4}", p) for p in state["patrons"])


@pytest.mark.parametrize("env_name", ENV_NAMES)
def test_example_responses_validate(env_name):
    env = registry.create(env_name)
    for tool in env.tools():
        ok(env, tool.original_name, EXAMPLE_CALLS[env_name][tool.original_name])
        ok(registry.create(env_name), tool.name, EXAMPLE_CALLS[env_name][tool.original_name])


@pytest.mark.parametrize("env_name", ENV_NAMES)
def test_reset_restores_initial_state(env_name):
    env = registry.create(env_name)
    initial = env.state()
    for tool, args in EXAMPLE_CALLS[env_name].items():
        ok(env, tool, args)
    assert env.state() != initial
    env.reset()
    assert env.state() == initial
    for tool, args in EXAMPLE_CALLS[env_name].items():  # and works again after the reset
        ok(env, tool, args)


@pytest.mark.parametrize("env_name", ENV_NAMES)
def test_instances_and_snapshots_do_not_share_state(env_name):
    first, second = registry.create(env_name), registry.create(env_name)
    untouched = second.state()
    for tool, args in EXAMPLE_CALLS[env_name].items():
        ok(first, tool, args)
    assert second.state() == untouched
    snapshot = first.state()
    snapshot.clear()
    assert first.state() != {}
    json.dumps(first.state())  # JSON-native


@pytest.mark.parametrize("env_name", ENV_NAMES)
def test_call_level_errors(env_name):
    env = registry.create(env_name)
    name, args = next(iter(EXAMPLE_CALLS[env_name].items()))
    fails(env, "no_such_tool", {}, "TOOL_NOT_AVAILABLE")
    fails(env, None, {}, "TOOL_NOT_AVAILABLE")  # type: ignore[arg-type]
    fails(env, "__init__", {}, "TOOL_NOT_AVAILABLE")  # no getattr on model strings
    fails(env, "reset", {}, "TOOL_NOT_AVAILABLE")
    fails(env, name, None, "INVALID_PARAMETERS")
    fails(env, name, ["a"], "INVALID_PARAMETERS")
    fails(env, name, {**args, "unexpected": 1}, "INVALID_PARAMETERS")
    required = _tool(env, name).parameters.get("required", [])
    fails(env, name, {k: v for k, v in args.items() if k not in required}, "INVALID_PARAMETERS")
    fails(env, name, {k: 12345 if isinstance(v, str) else "x" for k, v in args.items()}, "INVALID_PARAMETERS")


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)


@pytest.mark.parametrize("env_name", ENV_NAMES)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_garbage_calls_never_raise(env_name, data):
    env = registry.create(env_name)
    tools = {t.original_name: t for t in env.tools()}
    name = data.draw(st.sampled_from(sorted(tools)) | st.text(max_size=12) | _json)
    known = isinstance(name, str) and name in tools
    params = sorted(tools[name].parameters.get("properties", {})) if known else []
    keys = st.sampled_from(params) | st.text(max_size=8) if params else st.text(max_size=8)
    plausible = st.text(max_size=30) | st.sampled_from(
        ["ACC-1001", "ACC-1004", "BK-005", "P-1077", "/", "/notes/todo.txt", "/system", "..", "mystery"]
    )
    arguments = data.draw(st.dictionaries(keys, plausible | _json, max_size=5) | _json)
    response = env.execute(name, arguments)
    assert isinstance(response, dict)
    json.dumps(response)
    if "error" not in response:
        Draft202012Validator(tools[name].response).validate(response)


# ---- tasks -----------------------------------------------------------------------

# The calls a competent agent would make for each task, in order (some fail on purpose).
INTENDED: dict[tuple[str, str], list[tuple[str, dict[str, Any]]]] = {
    ("bank", "check-balance"): [("get_account", {"account_id": "ACC-1003"})],
    ("bank", "deposit-cash"): [("deposit", {"account_id": "ACC-1003", "amount": 500})],
    ("bank", "transfer-to-savings"): [
        ("transfer", {"from_account_id": "ACC-1001", "to_account_id": "ACC-1002", "amount": 200})
    ],
    ("bank", "freeze-lost-card"): [("freeze_account", {"account_id": "ACC-1003", "reason": "lost_card"})],
    ("bank", "withdraw-insufficient"): [("withdraw", {"account_id": "ACC-1005", "amount": 400})],
    ("bank", "withdraw-frozen"): [("withdraw", {"account_id": "ACC-1004", "amount": 100})],
    ("bank", "recent-transactions"): [("list_transactions", {"account_id": "ACC-1001", "limit": 3})],
    ("bank", "transfer-over-daily-limit"): [
        ("transfer", {"from_account_id": "ACC-1002", "to_account_id": "ACC-1001", "amount": 1500}),
        ("transfer", {"from_account_id": "ACC-1002", "to_account_id": "ACC-1001", "amount": 1000}),
    ],
    ("files", "read-todo"): [("read_file", {"path": "/notes/todo.txt"})],
    ("files", "list-website"): [("list_directory", {"path": "/projects/website"})],
    ("files", "create-shopping-list"): [
        ("write_file", {"path": "/notes/shopping.txt", "content": "eggs, bread, coffee"})
    ],
    ("files", "make-project-dir"): [("create_directory", {"path": "/projects/app"})],
    ("files", "delete-stylesheet"): [("delete_file", {"path": "/projects/website/style.css"})],
    ("files", "archive-meeting-notes"): [
        ("move_file", {"source": "/notes/meeting-2025-03-10.md", "destination": "/archive"})
    ],
    ("files", "edit-readonly-config"): [
        ("write_file", {"path": "/system/config.ini", "content": "proxy = 10.0.0.1", "overwrite": True})
    ],
    ("files", "copy-budget"): [
        ("read_file", {"path": "/projects/budget.csv"}),
        (
            "write_file",
            {"path": "/archive/budget-q1.csv", "content": "month,amount\njan,1200\nfeb,980\nmar,1105\n"},
        ),
    ],
    ("library", "who-wrote"): [("search_catalog", {"query": "The Left Hand of Darkness"})],
    ("library", "book-shelf"): [("get_book", {"book_id": "BK-016"})],
    ("library", "author-books"): [("search_catalog", {"query": "Kazuo Ishiguro"})],
    ("library", "available-mysteries"): [("list_books", {"genre": "mystery", "available_only": True})],
    ("library", "hold-by-id"): [("place_hold", {"book_id": "BK-005", "patron_id": "P-1042"})],
    ("library", "hold-by-title"): [
        ("search_catalog", {"query": "Neuromancer"}),
        ("place_hold", {"book_id": "BK-008", "patron_id": "P-1042"}),
    ],
    ("library", "hold-limit"): [("place_hold", {"book_id": "BK-037", "patron_id": "P-1077"})],
    ("library", "early-science-fiction"): [("list_books", {"genre": "science-fiction", "year_to": 1949})],
    # Foreseeable failures: the refusal is said, and the path that works is taken.
    ("bank", "withdraw-more-than-held"): [("withdraw", {"account_id": "ACC-1005", "amount": 40})],
    ("bank", "deposit-into-frozen"): [("deposit", {"account_id": "ACC-1004", "amount": 250})],
    ("bank", "transfer-from-low-balance"): [
        ("transfer", {"from_account_id": "ACC-1005", "to_account_id": "ACC-1003", "amount": 100})
    ],
    ("files", "replace-todo"): [
        ("write_file", {"path": "/notes/todo.txt", "content": "- water the plants", "overwrite": True})
    ],
    ("files", "readme-in-new-folder"): [
        ("create_directory", {"path": "/projects/app"}),
        ("write_file", {"path": "/projects/app/README.md", "content": "# App"}),
    ],
    ("library", "hold-silent-spring"): [
        ("search_catalog", {"query": "Silent Spring"}),
        ("place_hold", {"book_id": "BK-035", "patron_id": "P-1100"}),
    ],
    ("library", "shelf-of-ackroyd"): [("get_book", {"book_id": "BK-030"})],
}

ALL_TASKS = [(env_name, task) for env_name in ENV_NAMES for task in registry.load_tasks(env_name)]


@pytest.mark.parametrize("env_name", ENV_NAMES)
def test_tasks_file_shape(env_name):
    tasks = registry.load_tasks(env_name)
    assert len(tasks) >= 6
    # two held-out tasks of each environment, then those of foreseeable failures
    assert sorted(t["split"] for t in tasks).count("heldout") == {"bank": 5, "files": 4, "library": 4}[env_name]
    assert {name for env, name in INTENDED if env == env_name} == {t["name"] for t in tasks}
    tools = {t.original_name: t for t in registry.create(env_name).tools()}
    for task in tasks:
        for expected in task["check"].get("includes_calls", []):
            ((tool_name, params),) = expected.items()
            assert tool_name in tools, (task["name"], tool_name)
            assert set(params) <= set(tools[tool_name].parameters["properties"]), task["name"]


@pytest.mark.parametrize(("env_name", "task"), ALL_TASKS, ids=[f"{e}-{t['name']}" for e, t in ALL_TASKS])
def test_intended_calls_satisfy_the_check(env_name, task):
    env = registry.create(env_name)
    params = {t.original_name: t.parameters for t in env.tools()}
    calls = INTENDED[(env_name, task["name"])]
    responses = [env.execute(name, args) for name, args in calls]
    check = task["check"]
    state = env.state()
    for cond in check.get("state", []):
        value = resolve(state, cond["path"])
        if "exists" in cond:
            assert (value is not _MISSING) == cond["exists"], cond
        else:
            assert value == cond["equals"], (cond, value)
    for expected in check.get("includes_calls", []):
        ((tool_name, _),) = expected.items()
        assert any(match_call(name, args, expected, params[tool_name]).ok for name, args in calls), expected
    # Whatever the answer must say has to be learnable from the tools' responses.
    seen = json.dumps(responses, ensure_ascii=False).lower()
    for needle in check.get("answer_contains", []):
        assert needle.lower() in seen, needle


def test_mutating_tasks_start_from_a_different_state():
    # A state check that already holds at the start would pass without the agent doing anything,
    # unless the task is about refusing: then an attempted call, or the refusal said, is required.
    for env_name, task in ALL_TASKS:
        conds = task["check"].get("state", [])
        state = registry.create(env_name).state()
        holds = all(
            (resolve(state, c["path"]) is not _MISSING) == c["exists"]
            if "exists" in c
            else resolve(state, c["path"]) == c["equals"]
            for c in conds
        )
        if conds and holds:
            assert task["check"].get("includes_calls") or task["check"].get("answer_contains"), task["name"]


# ---- registry --------------------------------------------------------------------


def test_registry_create_and_list():
    assert [cls.name for cls in registry.list_environments()] == list(ENV_NAMES)
    assert isinstance(registry.create("bank"), BankEnvironment)
    assert registry.create("files") is not registry.create("files")
    for cls in registry.list_environments():
        assert cls.description and issubclass(cls, Environment)


@pytest.mark.parametrize("bad", ["bankk", "", "BANK", None])
def test_registry_unknown_environment(bad):
    with pytest.raises(EnvironmentNotFound, match="available: bank, files, library"):
        registry.create(bad)
    with pytest.raises(EnvironmentNotFound):
        registry.load_tasks(bad)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            '{"name": "a", "prompt": "p", "check": {"answer_contains": ["x"]}, "split": "train"}\n{oops',
            r"tasks\.jsonl:2: invalid JSON",
        ),
        ("[1, 2]", r"tasks\.jsonl:1: expected a JSON object"),
        ('{"name": "a", "prompt": "p", "split": "train"}', r"tasks\.jsonl:1: missing key\(s\) \['check'\]"),
        ('{"name": "a", "prompt": " ", "check": {"x": 1}, "split": "train"}', r":1: 'prompt' must be"),
        ('{"name": "a", "prompt": "p", "check": {}, "split": "train"}', r":1: 'check' must be"),
        ('{"name": "a", "prompt": "p", "check": {"x": 1}, "split": "test"}', r":1: 'split' must be one of"),
        (
            "\n\n".join(
                [
                    '{"name": "a", "prompt": "p", "check": {"x": 1}, "split": "train"}',
                    '{"name": "a", "prompt": "q", "check": {"x": 1}, "split": "train"}',
                ]
            ),
            r":3: duplicate task name 'a'",
        ),
    ],
)
def test_parse_tasks_locates_bad_lines(text, problem):
    with pytest.raises(TaskError, match=problem):
        registry.parse_tasks(text, "examples/x/tasks.jsonl")


def test_parse_tasks_skips_blank_lines():
    text = '\n{"name": "a", "prompt": "p", "check": {"answer_contains": ["x"]}, "split": "heldout"}\n\n'
    assert registry.parse_tasks(text, "t.jsonl") == [
        {"name": "a", "prompt": "p", "check": {"answer_contains": ["x"]}, "split": "heldout"}
    ]
