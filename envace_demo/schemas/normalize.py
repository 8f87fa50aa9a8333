"""Normalizing one schema document (a tool's parameters or its response) to Draft 2020-12:
dialect aliases mapped, local ``$ref`` inlined within budget, BFCL's habits read as its
ground truth reads them."""

from __future__ import annotations

import copy
import json
from typing import Any
from urllib.parse import unquote

from envace_demo.errors import SchemaError
from envace_demo.policy import InputPolicy
from envace_demo.schemas.keywords import (
    ANNOTATIONS,
    DROPPED,
    JSON_TYPES,
    OPENING,
    SCHEMA_LIST,
    SCHEMA_MAP,
    SCHEMA_ONE,
    TYPE_ALIASES,
)
from envace_demo.schemas.paths import join, json_type


class Budget:
    """Counters shared by every document of one load_tools call."""

    def __init__(self, limits: InputPolicy):
        self.limits = limits
        self.refs = 0  # $ref expansions so far
        self.inlined_bytes = 0  # JSON size of everything copied in by $ref expansion


class Normalizer:
    """Rewrite one schema document (a tool's parameters or response) to 2020-12.

    ``$ref`` pointers resolve against the document root. Each definition is
    normalized once and copied at each use; cycles, chains and total expansion
    size are bounded so that a small input cannot grow without limit.

    Normalizing the output again must change nothing (an exported tool loads back
    equal), so each node is normalized for where it ends up: ``root`` says it
    becomes the document's top object, which is read differently (no null
    default; for tool arguments, a missing "properties" is the ``{}`` added).
    """

    def __init__(self, doc: dict, loc: str, budget: Budget, arguments: bool = False):
        self.doc, self.loc, self.budget = doc, loc, budget
        self.arguments = arguments  # the document is a tool's parameters
        self.limits = budget.limits
        # (pointer, root) -> (normalized, size, height)
        self.memo: dict[tuple[str, bool], tuple[Any, int, int]] = {}
        self.active: list[str] = ["#"]  # refs being expanded; "#" = the root itself

    def root(self) -> dict:
        return self.schema(self.doc, self.loc, 1, root=True)

    def schema(self, node: Any, loc: str, depth: int, root: bool = False) -> Any:
        if isinstance(node, bool):  # true / false are schemas in 2020-12
            return node
        if not isinstance(node, dict):
            raise SchemaError(loc, f"must be a schema object, got {json_type(node)}")
        if depth > self.limits.max_depth:
            raise SchemaError(
                loc, f"nested more than {self.limits.max_depth} levels deep after inlining $ref"
            )
        if "$ref" in node:
            return self._ref(node, loc, depth, root)

        out: dict[str, Any] = {}
        optional_names: set[str] = set()
        for key, value in node.items():
            kloc = join(loc, key)
            if key == "type":
                mapped = self._type(value, kloc)
                if mapped is not None:
                    out["type"] = mapped
            elif key == "optional":  # BFCL: true on a property, or a list of names on its object
                if isinstance(value, list) and all(isinstance(v, str) for v in value):
                    optional_names.update(value)
                elif _optional_flag(value) is None:
                    raise SchemaError(kloc, "must be true/false or a list of property names")
            elif key in DROPPED:
                continue
            elif key in ("$dynamicRef", "$recursiveRef"):
                raise SchemaError(kloc, f'{key} is not supported: use $ref to "#/$defs/..."')
            elif key == "required":
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise SchemaError(
                        kloc, f"must be a list of property names (strings), got {json.dumps(value)[:80]}"
                    )
                out["required"] = list(value)
            elif key == "enum":
                if not isinstance(value, list):
                    raise SchemaError(kloc, f"must be a list of allowed values, got {json_type(value)}")
                if not value:
                    raise SchemaError(kloc, "is empty: no value could ever match")
                out["enum"] = copy.deepcopy(value)
            elif key in ("pattern", "patternProperties") and self._refuses_regex(key, value):
                raise SchemaError(kloc, "regular expressions are not accepted here (public mode); remove it")
            elif key in SCHEMA_MAP:
                out[key] = self._schema_map(key, value, kloc, depth, optional_names)
            elif key in SCHEMA_LIST or (key == "items" and isinstance(value, list)):
                if not isinstance(value, list) or not value:
                    raise SchemaError(
                        kloc, f"must be a non-empty list of schemas, got {json.dumps(value)[:80]}"
                    )
                # Draft-07 tuple form "items": [...] is "prefixItems" in 2020-12.
                target = "prefixItems" if key == "items" else key
                out[target] = [self.schema(v, join(kloc, i), depth + 2) for i, v in enumerate(value)]
            elif key == "additionalItems":  # draft-07: items beyond the tuple; else meaningless
                if isinstance(node.get("items"), list):
                    out["items"] = self.schema(value, kloc, depth + 1)
            elif key in SCHEMA_ONE:
                out[key] = self.schema(value, kloc, depth + 1)
            else:  # annotations and validation keywords with plain values
                out[key] = copy.deepcopy(value)

        if root and self.arguments:
            out.setdefault("properties", {})  # load_tool adds it anyway; read "required" with it
        if "required" in out:
            out["required"] = self._required(out, optional_names)
        _fix_bfcl_quirks(out, null_default=not root)
        return out

    def _refuses_regex(self, key: str, value: Any) -> bool:
        patterns = list(value) if key == "patternProperties" and isinstance(value, dict) else [value]
        return any(isinstance(p, str) and self.limits.regex_refused(p) for p in patterns)

    def _type(self, value: Any, loc: str) -> str | list[str] | None:
        names = value if isinstance(value, list) else [value]
        mapped: list[str] = []
        for i, name in enumerate(names):
            nloc = join(loc, i) if isinstance(value, list) else loc
            if not isinstance(name, str):
                raise SchemaError(nloc, f"must be a type name (string), got {json_type(name)}")
            if name in TYPE_ALIASES:
                alias = TYPE_ALIASES[name]
                if alias is None:  # "any" anywhere means no constraint at all
                    return None
                name = alias
            elif name not in JSON_TYPES:
                raise SchemaError(
                    nloc,
                    f"unknown type {json.dumps(name)} (expected one of {', '.join(sorted(JSON_TYPES))})",
                )
            if name not in mapped:
                mapped.append(name)
        if isinstance(value, list):
            return mapped
        return mapped[0]

    def _schema_map(self, key: str, value: Any, loc: str, depth: int, optional_names: set[str]) -> dict:
        if not isinstance(value, dict):
            raise SchemaError(loc, f"must be an object mapping names to schemas, got {json_type(value)}")
        if key == "properties" and len(value) > self.limits.max_properties:
            raise SchemaError(loc, f"{len(value)} properties, at most {self.limits.max_properties}")
        out = {}
        for name, sub in value.items():
            if key == "properties" and isinstance(sub, dict) and _optional_flag(sub.get("optional")):
                optional_names.add(name)
            out[name] = self.schema(sub, join(loc, name), depth + 2)
        return out

    def _required(self, out: dict, optional_names: set[str]) -> list[str]:
        props = out.get("properties")
        # BFCL lists names it never defines; drop them only where nothing else could match them.
        closed = (
            isinstance(props, dict)
            and not OPENING & out.keys()
            and out.get("additionalProperties", False) is False
            and out.get("unevaluatedProperties", False) is False
        )
        kept: list[str] = []
        for name in out["required"]:
            if name in optional_names or name in kept or (closed and name not in props):
                continue
            kept.append(name)
        return kept

    def _ref(self, node: dict, loc: str, depth: int, root: bool) -> Any:
        ref, rloc = node["$ref"], join(loc, "$ref")
        if not isinstance(ref, str):
            raise SchemaError(rloc, f"must be a string, got {json_type(ref)}")
        if not ref.startswith("#"):
            raise SchemaError(
                rloc, f'remote reference {ref!r} refused: only local ones ("#/$defs/Name") are resolved'
            )
        if ref != "#" and not ref.startswith("#/"):
            raise SchemaError(rloc, f'unsupported reference {ref!r}: use a JSON pointer like "#/$defs/Name"')
        if ref in self.active:
            cycle = " -> ".join(self.active[self.active.index(ref) :] + [ref])
            raise SchemaError(rloc, f"recursive reference {ref!r} cannot be inlined (cycle: {cycle})")
        budget = self.budget
        budget.refs += 1
        if budget.refs > self.limits.max_refs:
            raise SchemaError(rloc, f"more than {self.limits.max_refs} $ref expansions")

        siblings = {k: v for k, v in node.items() if k != "$ref"}
        if not siblings:
            return self._inline(ref, rloc, depth, root)
        # The siblings decide where the definition lands: merged in place, or under allOf.
        # Not read as the root: checks go under allOf, and annotations read the same anywhere.
        rest = self.schema(siblings, loc, depth)
        merge = all(k in ANNOTATIONS for k in rest)
        inlined = self._inline(ref, rloc, depth if merge else depth + 2, root and merge)
        if merge and isinstance(inlined, dict):
            merged = {**inlined, **rest}  # e.g. pydantic's {"$ref": ..., "description": ...}
            _fix_bfcl_quirks(merged, null_default=not root)  # the site's "default" may be null
            return merged
        notes = {k: v for k, v in rest.items() if k in ANNOTATIONS}
        checks = {k: v for k, v in rest.items() if k not in ANNOTATIONS}
        if depth + 1 + nesting_height(checks) > self.limits.max_depth:  # checks land 2 levels down
            raise SchemaError(loc, f"nested more than {self.limits.max_depth} levels deep beside $ref")
        return {**notes, "allOf": [inlined, checks]}

    def _inline(self, ref: str, rloc: str, depth: int, root: bool) -> Any:
        """A copy of the definition ``ref`` points to, normalized for ``depth`` and ``root``."""
        key = (ref, root)
        if key not in self.memo:
            if len(self.active) > self.limits.max_depth:
                raise SchemaError(rloc, f"$ref chain longer than {self.limits.max_depth}")
            target, tloc = self._resolve(ref, rloc)
            self.active.append(ref)
            try:
                normalized = self.schema(target, tloc, depth, root)
            finally:
                self.active.pop()
            self.memo[key] = (normalized, len(json.dumps(normalized)), nesting_height(normalized))
        normalized, size, height = self.memo[key]
        if depth - 1 + height > self.limits.max_depth:
            raise SchemaError(
                rloc, f"nested more than {self.limits.max_depth} levels deep after inlining {ref!r}"
            )
        budget = self.budget
        budget.inlined_bytes += size
        if budget.inlined_bytes > self.limits.max_bytes:
            raise SchemaError(rloc, f"inlining $ref grows the schemas past {self.limits.max_bytes:,} bytes")
        return copy.deepcopy(normalized)

    def _resolve(self, ref: str, loc: str) -> tuple[Any, str]:
        node: Any = self.doc
        tloc = self.loc
        for token in ref[2:].split("/") if ref != "#" else []:
            token = unquote(token).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                token = int(token)
                node = node[token]
            else:
                raise SchemaError(loc, f"reference {ref!r} points to nothing (no {token!r} in {tloc})")
            tloc = join(tloc, token)
        return node, tloc


def _optional_flag(value: Any) -> bool | None:
    """BFCL's "optional" flag: a boolean, sometimes written as the string "True"."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return None


def _fix_bfcl_quirks(out: dict, null_default: bool) -> None:
    """Read two BFCL habits the way its ground truth does (both seen in bfcl_live_simple).

    - ``"enum"`` on an array lists the allowed *items* (live_simple_71: metrics
      ``["view"]`` against enum ``["favorability", ..., "view"]``): move it to ``items``.
    - ``"default": null`` on a typed property (Python ``x: str = None``): null is a
      legitimate value, and BFCL's answers pass it (live_simple_30, 58, 70, 81, 90).
      Not at the document root: the arguments themselves are always an object.
    """
    enum = out.get("enum")
    if out.get("type") == "array" and isinstance(enum, list) and not any(isinstance(v, list) for v in enum):
        items = out.get("items")
        if items is None or items is True:
            items = {}
        if isinstance(items, dict) and "enum" not in items:
            out["items"] = {**items, "enum": out.pop("enum")}
    if null_default and "default" in out and out["default"] is None:
        kind = out.get("type")
        if isinstance(kind, str) and kind != "null":
            out["type"] = [kind, "null"]
        elif isinstance(kind, list) and "null" not in kind:
            out["type"] = [*kind, "null"]
        if isinstance(out.get("enum"), list) and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]


def nesting_height(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((nesting_height(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((nesting_height(v) for v in value), default=0)
    return 0
