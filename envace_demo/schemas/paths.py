"""Where a problem is: the located paths of the schema loader's messages
(``tools[0].function.parameters.properties.unit.type``)."""

from __future__ import annotations

import json
import re
from typing import Any

_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$-]*")


def join(loc: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{loc}[{key}]"
    if _IDENT.fullmatch(key):
        return f"{loc}.{key}" if loc else key
    return f"{loc}[{json.dumps(key)}]"


def join_path(loc: str, path: list) -> str:
    for key in path:
        loc = join(loc, key)
    return loc


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def root_label(value: Any) -> str:
    """How a parsed input's root is addressed: a list is ``tools``, a single tool ``tools[0]``."""
    if isinstance(value, list):
        return "tools"
    if isinstance(value, dict) and "tools" in value:
        return ""
    return "tools[0]"
