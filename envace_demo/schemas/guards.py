"""Hostile input: size, depth and strict-JSON checks that run before anything walks the
input, each one linear and stopping as soon as a limit is passed."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from envace_demo.errors import SchemaError
from envace_demo.policy import DEFAULT_POLICY, InputPolicy
from envace_demo.schemas.paths import join_path, root_label
from envace_demo.strict_json import refuse_constant


def parse_input(source: Any, limits: InputPolicy) -> Any:
    if isinstance(source, (bytes, bytearray)):
        if len(source) > limits.max_bytes:
            raise SchemaError("input", f"too large: {len(source):,} bytes, at most {limits.max_bytes:,}")
        try:
            source = bytes(source).decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise SchemaError("input", f"not UTF-8 text (bad byte at offset {e.start})") from None
    if isinstance(source, str):
        # len() in characters is a lower bound on the UTF-8 size: check it before encoding.
        size = len(source) if len(source) > limits.max_bytes else len(source.encode("utf-8", "surrogatepass"))
        if size > limits.max_bytes:
            raise SchemaError("input", f"too large: {size:,} bytes, at most {limits.max_bytes:,}")
        if not source.strip():
            raise SchemaError("input", 'empty: paste a tool schema, a list of them, or {"tools": [...]}')
        check_text_depth(source, limits.max_depth)
        try:
            return json.loads(source, parse_constant=refuse_constant)
        except json.JSONDecodeError as e:
            raise SchemaError(
                "input", f"invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}"
            ) from None
        except ValueError as e:  # NaN / Infinity, refused by refuse_constant
            raise SchemaError("input", str(e)) from None
    if isinstance(source, (dict, list)):
        # The walk stops once its lower bound on the JSON size passes the cap, so a huge
        # value costs no more than one of max_bytes; the exact size is measured after it.
        check_value(source, root_label(source), limits)
        size = len(json.dumps(source, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        if size > limits.max_bytes:
            raise SchemaError("input", f"too large: {size:,} bytes as JSON, at most {limits.max_bytes:,}")
        return source
    raise SchemaError("input", f"expected JSON text, bytes, a dict or a list, got {type(source).__name__}")


def check_plain_json(value: Any, where: str, limits: InputPolicy = DEFAULT_POLICY) -> None:
    """SchemaError unless ``value`` is plain JSON within ``limits`` (depth, and max_bytes as
    JSON); the walk stops as soon as it is over, so a huge value costs no more than the cap."""
    check_value(value, where, limits, size_loc=where)


# A JSON string literal (escapes included), or one bracket. The quantifiers are possessive
# and a string left open runs to the end of the text (a lone backslash there included), so
# every match attempt at a quote succeeds and no character is read twice: one linear pass
# whatever the text (json.loads then reports the open string, located).
_TEXT_TOKEN = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+(?:"|\\?\Z)|[\[\]{}]', re.DOTALL)


def check_text_depth(text: str, max_depth: int) -> None:
    """Refuse deep nesting before json.loads recurses into it (RecursionError or worse),
    in one linear pass over the text."""
    if text.count("[") + text.count("{") <= max_depth:
        return
    depth = 0
    for m in _TEXT_TOKEN.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > max_depth:
                pos = m.start()
                line = text.count("\n", 0, pos) + 1
                col = pos - text.rfind("\n", 0, pos)
                raise SchemaError(
                    "input", f"nested more than {max_depth} levels deep (at line {line}, column {col})"
                )
        elif c in "]}":
            depth -= 1


def check_value(root: Any, root_loc: str, limits: InputPolicy, size_loc: str = "input") -> None:
    """Check an already-parsed value is plain JSON and not too deep, without recursion.

    Every value counts no more than the bytes json.dumps gives it (a string its characters
    and quotes, a key with its quotes and ": ", a container its brackets and ", "): once that lower bound passes
    ``max_bytes`` the walk stops, so it never does more than a ``max_bytes`` text's work.
    Locations are built only for an error (the path is kept as a parent chain)."""
    budget = limits.max_bytes
    seen = 0
    stack: list[tuple[Any, Any, int]] = [(root, None, 1)]  # (value, (parent link, key), depth)
    while stack:
        value, link, depth = stack.pop()
        if isinstance(value, str):
            seen += len(value) + 2
        elif isinstance(value, (dict, list)):
            seen += 2 * len(value) if value else 2  # brackets, and ", " between items
            if seen > budget:  # before a child is pushed: a list of millions stops here
                raise SchemaError(size_loc, f"too large: at least {seen:,} bytes as JSON, at most {budget:,}")
            if depth > limits.max_depth:
                raise SchemaError(_link_loc(root_loc, link), f"nested more than {limits.max_depth} levels deep")
            if isinstance(value, dict):
                for k, v in value.items():
                    if not isinstance(k, str):
                        loc = _link_loc(root_loc, link)
                        raise SchemaError(loc, f"keys must be strings, got {type(k).__name__} {k!r}")
                    seen += len(k) + 4  # quotes and ": "
                    stack.append((v, (link, k), depth + 1))
            else:
                stack.extend((v, (link, i), depth + 1) for i, v in enumerate(value))
        elif isinstance(value, float) and not math.isfinite(value):
            raise SchemaError(_link_loc(root_loc, link), f"{value} is not valid JSON")
        elif not (value is None or isinstance(value, (str, int, float, bool))):
            raise SchemaError(_link_loc(root_loc, link), f"not a JSON value: {type(value).__name__}")
        else:
            seen += 1
        if seen > budget:
            raise SchemaError(size_loc, f"too large: at least {seen:,} bytes as JSON, at most {budget:,}")


def _link_loc(root_loc: str, link: Any) -> str:
    keys = []
    while link is not None:
        link, key = link
        keys.append(key)
    return join_path(root_loc, keys[::-1])
