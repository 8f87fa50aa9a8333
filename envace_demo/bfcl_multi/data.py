"""BFCL v4 multi-turn: the entries, their function docs and their ground truth, read from
the ``bfcl-eval`` package (installed without its dependencies: ``make setup``).

What is read, and how, follows BFCL's own loader (``bfcl_eval.utils.load_dataset_entry``):
an entry's functions are the docs of its ``involved_classes`` in that order, each
description ending with BFCL's Python hint; a miss_func entry's ``missed_function``
(user turn -> names) moves those docs out of the list until that turn (without the hint:
BFCL adds it only to the list it offers from the start). BFCL's loader itself is not
imported: importing ``bfcl_eval.utils`` creates folders beside the installed package.

Kept: the eight backends the four multi-turn categories use (file system, math, messages,
posts, tickets, trading, travel, vehicle). Left out: ``WebSearchAPI`` (it needs the
network and a SerpAPI key) and the ``MemoryAPI_*`` backends (sentence-transformers,
faiss, rank_bm25): an entry that involves one of them is refused.

Ground-truth calls are BFCL's strings (``sort('final_report.pdf')``); they are read with
``ast`` (literals only: never evaluated) and their positional arguments named from the
backend method's signature.
"""

from __future__ import annotations

import ast
import copy
import functools
import importlib
import importlib.util
import inspect
import json
from pathlib import Path
from typing import Any

from envace_demo.errors import ConfigError, TaskError
from envace_demo.record import ToolCall

# The pinned release whose data and checker this module was written against.
BFCL_EVAL_VERSION = "2026.3.23"
VERSION_PREFIX = "BFCL_v4"
# The multi-turn categories of BFCL v4's score (the paper's "BFCL v4 multi-turn").
CATEGORIES = ("base", "miss_func", "miss_param", "long_context")

_BACKENDS = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
# Class -> (module, function-doc file), as bfcl_eval.constants.executable_backend_config maps them.
KEPT_CLASSES: dict[str, tuple[str, str]] = {
    "GorillaFileSystem": ("gorilla_file_system", "gorilla_file_system.json"),
    "MathAPI": ("math_api", "math_api.json"),
    "MessageAPI": ("message_api", "message_api.json"),
    "TwitterAPI": ("posting_api", "posting_api.json"),
    "TicketAPI": ("ticket_api", "ticket_api.json"),
    "TradingBot": ("trading_bot", "trading_bot.json"),
    "TravelAPI": ("travel_booking", "travel_booking.json"),
    "VehicleControlAPI": ("vehicle_control", "vehicle_control.json"),
}
# Why each backend BFCL has beyond those is not offered here.
LEFT_OUT_CLASSES: dict[str, str] = {
    "WebSearchAPI": "needs the network and a SerpAPI key",
    "MemoryAPI_kv": "needs rank_bm25 (not installed)",
    "MemoryAPI_vector": "needs sentence-transformers and faiss (not installed)",
    "MemoryAPI_rec_sum": "memory category, not multi-turn (not installed)",
}
# Classes without a scenario to load (bfcl_eval's STATELESS_CLASSES).
STATELESS_CLASSES = frozenset({"MathAPI"})

# BFCL's user message for a miss_func turn whose functions are now offered (its question turn
# is empty): bfcl_eval.constants.default_prompts.DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC.
ADDED_FUNCTIONS_MESSAGE = "I have updated some more functions you can choose from. What about now?"
# The hint BFCL appends to every offered function's description (Python categories).
PYTHON_HINT = " Note that the provided function is in Python 3 syntax."

INSTALL_HINT = f"make setup (or: pip install --no-deps bfcl-eval=={BFCL_EVAL_VERSION})"


def package_dir() -> Path:
    """The installed ``bfcl_eval`` package's folder; ConfigError when it is not installed."""
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"BFCL multi-turn needs the bfcl-eval package: {INSTALL_HINT}")
    return Path(next(iter(spec.submodule_search_locations)))


def available() -> bool:
    """Whether bfcl-eval is installed (tests skip without it)."""
    return importlib.util.find_spec("bfcl_eval") is not None


def _json_lines(path: Path) -> list[dict]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{path}: cannot read ({err.strerror}); reinstall bfcl-eval: {INSTALL_HINT}") from None
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def category_of(entry_id: str) -> str:
    """``multi_turn_miss_func_12`` -> ``miss_func``."""
    stem = entry_id.removeprefix("multi_turn_").rsplit("_", 1)[0]
    if not entry_id.startswith("multi_turn_") or stem not in CATEGORIES:
        raise TaskError(f"{entry_id!r} is not a BFCL multi-turn entry id (multi_turn_<{'|'.join(CATEGORIES)}>_<n>)")
    return stem


def check_categories(categories: Any) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(c.strip() for c in categories if c and c.strip()))
    bad = [c for c in names if c not in CATEGORIES]
    if bad or not names:
        raise TaskError(f"BFCL multi-turn categories: expected some of {', '.join(CATEGORIES)}; got {list(categories)!r}")
    return names


@functools.cache
def _category(category: str) -> dict[str, dict]:
    """id -> entry (its ``ground_truth`` added), in file order. Shared: callers copy."""
    check_categories([category])
    data = package_dir() / "data"
    entries = _json_lines(data / f"{VERSION_PREFIX}_multi_turn_{category}.json")
    answers = {a["id"]: a["ground_truth"] for a in _json_lines(data / "possible_answer" / f"{VERSION_PREFIX}_multi_turn_{category}.json")}
    out: dict[str, dict] = {}
    for entry in entries:
        if entry["id"] not in answers:
            raise ConfigError(f"bfcl-eval data: no ground truth for {entry['id']}")
        entry["ground_truth"] = answers[entry["id"]]
        if len(entry["ground_truth"]) != len(entry["question"]):
            raise ConfigError(f"bfcl-eval data: {entry['id']} has {len(entry['question'])} user turns "
                              f"but {len(entry['ground_truth'])} ground-truth turns")
        out[entry["id"]] = entry
    return out


def entry_ids(category: str) -> list[str]:
    return list(_category(category))


def entry(entry_id: str) -> dict:
    """A copy of one entry (``question``, ``initial_config``, ``involved_classes``,
    ``missed_function`` for miss_func, and its ``ground_truth``)."""
    entries = _category(category_of(entry_id))
    if entry_id not in entries:
        raise TaskError(f"no BFCL multi-turn entry {entry_id!r}")
    return copy.deepcopy(entries[entry_id])


def _shared(entry_or_id: dict | str) -> dict:
    """The entry itself (read-only use) from an entry or its id."""
    if isinstance(entry_or_id, dict):
        return entry_or_id
    entries = _category(category_of(entry_or_id))
    if entry_or_id not in entries:
        raise TaskError(f"no BFCL multi-turn entry {entry_or_id!r}")
    return entries[entry_or_id]


def check_classes(classes: list[str], where: str) -> None:
    left_out = [c for c in classes if c not in KEPT_CLASSES]
    if left_out:
        why = "; ".join(f"{c}: {LEFT_OUT_CLASSES.get(c, 'unknown backend')}" for c in left_out)
        raise TaskError(f"{where}: backend(s) left out of this project ({why})")


@functools.cache
def class_docs(class_name: str) -> tuple[dict, ...]:
    """The function docs of one backend class (bfcl_eval/data/multi_turn_func_doc)."""
    check_classes([class_name], "function docs")
    return tuple(_json_lines(package_dir() / "data" / "multi_turn_func_doc" / KEPT_CLASSES[class_name][1]))


def function_docs(entry_or_id: dict | str) -> tuple[list[dict], dict[int, list[dict]]]:
    """(the docs offered from the first turn, user turn -> docs added at that turn), as
    BFCL's loader builds them (``populate_test_cases_with_predefined_functions``, then the
    language hint on the first list only)."""
    e = _shared(entry_or_id)
    check_classes(e["involved_classes"], e["id"])
    offered = [dict(d) for c in e["involved_classes"] for d in class_docs(c)]  # only "description" changes
    missed: dict[int, list[dict]] = {}
    for turn, names in (e.get("missed_function") or {}).items():
        missed[int(turn)] = []
        for name in names:
            for i, doc in enumerate(offered):
                if doc["name"] == name:
                    missed[int(turn)].append(offered.pop(i))
                    break
    for doc in offered:
        doc["description"] = doc["description"] + PYTHON_HINT
    return offered, missed  # shared nested values: read, never changed


def all_docs(entry_or_id: dict | str) -> list[dict]:
    """Every function doc of the entry: offered first, then each added turn's."""
    offered, missed = function_docs(entry_or_id)
    return offered + [d for k in sorted(missed) for d in missed[k]]


@functools.lru_cache(maxsize=512)
def _tools(docs_json: str) -> tuple:
    from envace_demo.schemas import load_tools

    return tuple(load_tools(json.loads(docs_json)))


def tools(docs: list[dict]) -> list:
    """``schemas.load_tools(docs)`` (the project's BFCL dialect reader), cached: the same few
    class docs make every entry's tools, and normalizing them costs ~10 ms a list."""
    return copy.deepcopy(list(_tools(json.dumps(docs))))


def user_turns(entry_or_id: dict | str) -> list[str]:
    """The user message of every turn; an empty turn (miss_func: the held-back functions
    are now offered) carries BFCL's own message for it."""
    e = _shared(entry_or_id)
    out = []
    for k, turn in enumerate(e["question"]):
        users = [m for m in turn if m.get("role") == "user"]
        if len(users) != len(turn) or len(turn) > 1:
            raise TaskError(f"{e['id']}: turn {k} is not one user message")
        out.append(users[0]["content"] if users else ADDED_FUNCTIONS_MESSAGE)
    return out


def backend_class(class_name: str) -> type:
    """The backend class (imported on first use: ``bfcl_eval``'s func_source_code)."""
    check_classes([class_name], "backend")
    module = importlib.import_module(f"{_BACKENDS}.{KEPT_CLASSES[class_name][0]}")
    return getattr(module, class_name)


@functools.cache
def _owners(classes: tuple[str, ...]) -> dict[str, str]:
    """Function-doc name -> the class whose method it is (the docs' names are exactly the
    classes' public methods; no two kept classes share one)."""
    owners: dict[str, str] = {}
    for c in classes:
        for doc in class_docs(c):
            owners[doc["name"]] = c
    return owners


def owners(entry_or_id: dict | str) -> dict[str, str]:
    return dict(_owners(tuple(_shared(entry_or_id)["involved_classes"])))


# ---- ground truth ------------------------------------------------------------------------------


def parse_call(text: str) -> tuple[str, list[Any], dict[str, Any]]:
    """(name, positional values, keyword values) of one BFCL call string, read with ``ast``:
    the name must be a plain identifier and every argument a Python literal."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as err:
        raise TaskError(f"ground truth {text[:80]!r}: not a call ({err.msg})") from None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise TaskError(f"ground truth {text[:80]!r}: not a plain function call")
    try:
        args = [ast.literal_eval(a) for a in node.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg is not None}
    except ValueError:
        raise TaskError(f"ground truth {text[:80]!r}: an argument is not a literal") from None
    if len(kwargs) != len(node.keywords):
        raise TaskError(f"ground truth {text[:80]!r}: **arguments are not read")
    return node.func.id, args, kwargs


def _plain(value: Any) -> Any:
    """A literal as JSON has it (tuples become lists)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


@functools.cache
def _parameters(class_name: str, method: str) -> tuple[str, ...]:
    signature = inspect.signature(getattr(backend_class(class_name), method))
    return tuple(p for p in signature.parameters if p != "self")


def ground_truth_calls(entry_or_id: dict | str) -> list[list[ToolCall]]:
    """Each user turn's ground-truth calls as JSON calls (positional arguments named)."""
    e = _shared(entry_or_id)
    owner = owners(e)
    turns: list[list[ToolCall]] = []
    for strings in e["ground_truth"]:
        calls = []
        for text in strings:
            name, args, kwargs = parse_call(text)
            if name not in owner:
                raise TaskError(f"{e['id']}: ground truth calls {name!r}, which no involved class offers")
            names = _parameters(owner[name], name)
            if len(args) > len(names):
                raise TaskError(f"{e['id']}: {text[:80]!r} has more positional arguments than {name} takes")
            arguments = {**dict(zip(names, args)), **kwargs}
            calls.append(ToolCall(name, {k: _plain(v) for k, v in arguments.items()}))
        turns.append(calls)
    return turns
