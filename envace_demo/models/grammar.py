"""Constrained decoding: a ``Constraint`` compiled to an xgrammar logits processor.

Shapes (method doc §2, §3), written the way the Qwen3 template writes them:

    actor:     [<think>\\n…</think>\\n\\n] <tool_call>\\n{"name": …, "arguments": {…}}\\n</tool_call>
               (\\n<tool_call>…</tool_call>){0, max_calls-1}   |   a free answer (unless require_call)
    rehearser: [<think>\\n…</think>\\n\\n] <execution_result>\\n{JSON}\\n</execution_result>

then the stop token. Lessons from the stack notes, applied here: one grammar for
all tools (``anyOf`` over per-tool objects with a ``const`` name) is fast; compact
JSON (``", "`` and ``": "`` separators, no free whitespace) matches the template and
gives better arguments; unbounded strings, arrays and "any JSON" run away, so every
free value gets a length bound. The reasoning is bounded too (a small model would
otherwise spend its whole budget thinking) and may not contain ``<``, so it can
only end with ``</think>``.

Honest values: a free string (no ``enum``, ``const``, ``pattern`` or format xgrammar
enforces) is written with a pattern that has no ``<``, so an argument or a rehearsed
value can never carry the call's own markup (``<tool_call>``, ``</tool_call>``,
``<think>``) nor close the result early; its declared ``minLength``/``maxLength`` go
into that pattern (xgrammar ignores length keywords beside a pattern). Declared
patterns, enums and enforced formats are kept as they are.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from envace_demo.errors import ModelError
from envace_demo.models.base import Constraint
from envace_demo.models.ids import trained_on_contract

if TYPE_CHECKING:
    import xgrammar

CALL_OPEN, CALL_CLOSE = "<tool_call>\n", "\n</tool_call>"
RESULT_OPEN, RESULT_CLOSE = "<execution_result>\n", "\n</execution_result>"
ERROR_CODES = ("INVALID_TOOL_CALL_FORMAT", "TOOL_NOT_AVAILABLE", "INVALID_PARAMETERS")

MAX_THINK_CHARS = 300
# The rehearser's reasoning under a grammar: its result's shape is already fixed, and on the
# embedded model the bounded reasoning was about half of each rehearsal's 130-250 tokens.
MAX_REHEARSER_THINK_CHARS = 120
# Reasoning left after a stated lead (``Constraint.think_lead``): its outcome and a full stop.
MIN_THINK_AFTER_LEAD = 40
MAX_CALLS = 8  # per actor turn (default)
MAX_STRING = 200  # free strings in arguments
MAX_ITEMS = 16  # free arrays in arguments
# Free strings in a rehearsed result: small models loop inside strings, and four entries of
# two 60-character strings each ran past a CPU budget's 192 new tokens.
MAX_RESULT_STRING = 32
# A model trained to rehearse writes values it learnt (a file's three lines, a refusal's
# sentence): held to 32 characters it stopped inside them (a CSV of 39 characters, an
# 85-character refusal scored 0.42 and 0.72 for that alone).
TRAINED_RESULT_STRING = 96
# Declared result arrays too are narrowed to this: a small model fills an array to its
# bound, and 4 catalog entries (about 170 tokens) ran past a CPU budget's 192 new tokens.
MAX_RESULT_ITEMS = 3
MAX_RESULT_KEYS = 6
MAX_KEY = 40  # property names of free objects
# A counted regex repetition compiles in superlinear time (0.02 s at 300, 0.5 s at 1000,
# 10 s at 5000): a longer declared maxLength is narrowed to this in the grammar.
MAX_PATTERN_LENGTH = 300

# Keywords that already pin a string down: the declared shape is kept as it is.
_STRING_PINNED = ("enum", "const", "pattern")
# Formats xgrammar 0.2 enforces without admitting "<" (checked in tests); any other
# format is dropped from the grammar and the string gets the markup-free pattern.
ENFORCED_FORMATS = frozenset(
    {
        "date", "date-time", "time", "duration", "email", "hostname", "ipv4", "ipv6", "uuid",
        "uri", "uri-reference", "uri-template", "json-pointer", "relative-json-pointer",
    }
)
# A domain failure of a valid call, in the form the bundled environments answer with.
DOMAIN_ERROR_CODE_PATTERN = "^[A-Z][A-Z0-9_]{1,39}$"
_SUB_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames")
_SUB_LIST = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUB_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


# ---------------------------------------------------------------------------------
# JSON Schemas (pure functions: testable without a tokenizer)


def text_pattern(max_length: int, min_length: int = 0) -> str:
    """A regex for a string of ``min_length``..``max_length`` characters none of which is
    ``<``: the call and result markup cannot appear in it. (In xgrammar's JSON strings
    the pattern matches the text between the quotes; :func:`escapable_strings` lets the
    compiled grammar write line breaks, tabs, quotes and backslashes escaped.)"""
    low = max(0, min(min_length, MAX_PATTERN_LENGTH))
    high = max(low, min(max_length, MAX_PATTERN_LENGTH))
    return f"^[^<]{{{low},{high}}}$"


# xgrammar writes a pattern's string, and a length-bounded one, without escapes: no line
# breaks, so a file's lines could be neither written nor rehearsed (the model wrote
# "month,amount | feb,980" for a three-line CSV). The compiled EBNF of our markup-free
# pattern is replaced by one that also admits the escapes \n, \t, \" and \\ (each one
# character of the bound).
_TEXT_REGEX = re.compile(r'Regex\("\^\[\^<\]\{(\d+),(\d+)\}\$", json_string=true\)')
_TEXT_CHAR = '(([^\\0-\\x1f\\"\\\\<]) | ("\\\\" [nt\\"\\\\]))'
# A counted repetition of that choice costs xgrammar a mask computation that grows with the
# position in the string (xgrammar 0.2.9, the embedded tokenizer, 2 cores: 75 ms per token
# at the 10th character, 780 ms at the 150th; one rehearsed refusal of 93 tokens spent 8.6 s
# in masks, a third of its episode); an unbounded one costs 0.1 ms. So a string longer than
# this is unbounded in the grammar and bounded by the decoders instead, which close it once
# it is that long (``closing.close_scores``; ``GrammarCache.string_chars``).
GRAMMAR_STRING = 32


def escapable_strings(ebnf: str, opened: list[int] | None = None) -> str:
    """``ebnf`` (a JSON schema compiled by xgrammar) with every :func:`text_pattern` string
    able to carry the escapes of line breaks, tabs, quotes and backslashes: counted up to
    ``GRAMMAR_STRING`` characters, open beyond (its bound appended to ``opened``)."""

    def text(match: re.Match) -> str:
        low, high = int(match.group(1)), int(match.group(2))
        if high <= GRAMMAR_STRING:
            return f"{_TEXT_CHAR}{{{low},{high}}}"
        if opened is not None:
            opened.append(high)
        return (f"{_TEXT_CHAR}{{{low},{low}}} " if low else "") + f"{_TEXT_CHAR}*"

    return _TEXT_REGEX.sub(text, ebnf)


def free_string(max_length: int, min_length: int = 0) -> dict:
    return {"type": "string", "pattern": text_pattern(max_length, min_length)}


def _scalar(max_string: int) -> dict:
    return {
        "anyOf": [
            free_string(max_string),
            {"type": "number"},
            {"type": "boolean"},
            {"type": "null"},
        ]
    }


def _flat_array(max_string: int, max_items: int) -> dict:
    return {"type": "array", "items": _scalar(max_string), "maxItems": max_items}


def _flat_object(max_string: int, max_items: int, max_keys: int) -> dict:
    return {
        "type": "object",
        "propertyNames": {"minLength": 1, "maxLength": MAX_KEY},
        "additionalProperties": {"anyOf": [_scalar(max_string), _flat_array(max_string, max_items)]},
        "maxProperties": max_keys,
    }


def free_value_schema(max_string: int = MAX_STRING, max_items: int = MAX_ITEMS) -> dict:
    """A bounded stand-in for an unconstrained value (``{}`` or ``"type": "any"``):
    a scalar, a flat array, or a flat object."""
    return {
        "anyOf": [
            *_scalar(max_string)["anyOf"],
            _flat_array(max_string, max_items),
            _flat_object(max_string, max_items, MAX_RESULT_KEYS),
        ]
    }


def generic_result_schema(max_string: int = MAX_RESULT_STRING) -> dict:
    """A bounded "any result": a non-empty object of at most 6 keys whose values are
    scalars, flat arrays, flat objects or short arrays of flat objects; or a
    non-empty array of flat objects. Depth ≤ 3, every string and array capped."""
    flat = _flat_object(max_string, MAX_RESULT_ITEMS, MAX_RESULT_KEYS)
    value = {
        "anyOf": [
            _scalar(max_string),
            _flat_array(max_string, MAX_RESULT_ITEMS),
            flat,
            {"type": "array", "items": flat, "maxItems": 5},
        ]
    }
    return {
        "anyOf": [
            {
                "type": "object",
                "propertyNames": {"minLength": 1, "maxLength": MAX_KEY},
                "additionalProperties": value,
                "minProperties": 1,
                "maxProperties": MAX_RESULT_KEYS,
            },
            {"type": "array", "items": flat, "minItems": 1, "maxItems": MAX_RESULT_ITEMS},
        ]
    }


def error_result_schema() -> dict:
    """The rehearsal contract's error object (method doc §3)."""
    short = free_string(MAX_RESULT_STRING)
    return {
        "type": "object",
        "properties": {
            "error_tool_call": {
                "type": "object",
                "properties": {
                    "code": {"enum": list(ERROR_CODES)},
                    "message": free_string(2 * MAX_RESULT_STRING, 1),
                    "details": {
                        "type": "object",
                        "properties": {"errors": {"type": "array", "items": short, "maxItems": 4}},
                        "required": ["errors"],
                    },
                },
                "required": ["code", "message"],
            }
        },
        "required": ["error_tool_call"],
    }


def domain_error_schema(max_string: int = MAX_RESULT_STRING) -> dict:
    """A valid call's domain failure (unknown id, insufficient funds ...): what the
    bundled environments return, ``{"error": {"code": ..., "message": ...}}``, its
    message up to twice ``max_string``. Only the model can know it (validation cannot),
    so the rehearser may predict it."""
    return {
        "type": "object",
        "properties": {
            "error": {
                "type": "object",
                "properties": {
                    "code": {"type": "string", "pattern": DOMAIN_ERROR_CODE_PATTERN},
                    "message": free_string(2 * max_string, 1),
                },
                "required": ["code", "message"],
                "additionalProperties": False,
            }
        },
        "required": ["error"],
        "additionalProperties": False,
    }


def bound_schema(
    schema: Any, max_string: int = MAX_STRING, max_items: int = MAX_ITEMS, narrow: bool = False
) -> Any:
    """A copy of ``schema`` where nothing can grow without limit: free strings get a
    length bound, arrays ``maxItems``, free objects and unconstrained values become
    bounded flat shapes. What the schema already pins down is left alone; ``narrow``
    also lowers declared string and array bounds to ``max_string``/``max_items`` (a
    rehearsed result stays valid, and short: a declared 50 entries of 255 characters
    each would spend a CPU episode's time on one rehearsal)."""
    return _bound(copy.deepcopy(schema), max_string, max_items, narrow)


def _bound(node: Any, max_string: int, max_items: int, narrow: bool = False) -> Any:
    if node is True or node == {}:
        return free_value_schema(max_string, max_items)
    if not isinstance(node, dict):
        return node
    for key in _SUB_ONE:
        if isinstance(node.get(key), dict) or node.get(key) is True:
            if key == "additionalProperties" and node[key] is True and "properties" in node:
                node[key] = False  # keep declared objects closed rather than open-ended
            elif key not in ("propertyNames", "not"):
                node[key] = _bound(node[key], max_string, max_items, narrow)
    for key in _SUB_LIST:
        if isinstance(node.get(key), list):
            node[key] = [_bound(sub, max_string, max_items, narrow) for sub in node[key]]
    for key in _SUB_MAP:
        if isinstance(node.get(key), dict):
            node[key] = {name: _bound(sub, max_string, max_items, narrow) for name, sub in node[key].items()}

    kinds = node.get("type")
    kinds = set(kinds) if isinstance(kinds, list) else {kinds}
    if "string" in kinds and not any(k in node for k in _STRING_PINNED):
        if node.get("format") in ENFORCED_FORMATS:
            pass  # xgrammar writes the format itself; it admits no markup
        else:
            node.pop("format", None)
            if kinds == {"string"}:
                low = int(node.pop("minLength", 0) or 0)
                high = int(node.pop("maxLength", max_string))  # a declared bound is kept ...
                if narrow:  # ... unless narrowed (still within it)
                    high = min(high, max_string)
                node["pattern"] = text_pattern(high, low)
            else:  # a union type: a pattern applies to the string branch only
                node.setdefault("maxLength", max_string)
    if "array" in kinds and narrow and "maxItems" in node:
        node["maxItems"] = max(min(node["maxItems"], max_items), node.get("minItems", 0))
    if "array" in kinds and "maxItems" not in node:
        node["maxItems"] = max(max_items, node.get("minItems", 0))
        node.setdefault("items", free_value_schema(max_string, max_items))
    if "object" in kinds and not any(k in node for k in ("properties", "patternProperties")):
        extra = node.get("additionalProperties", True)
        if extra is not False:  # a free dict: bounded keys and values
            node["additionalProperties"] = _bound(extra, max_string, max_items, narrow)
            node.setdefault("maxProperties", MAX_RESULT_KEYS)
            node.setdefault("propertyNames", {"minLength": 1, "maxLength": MAX_KEY})
    return node


def call_schema(tools) -> dict:
    """One schema for a call to any of ``tools``: name first, then arguments."""
    if not tools:
        raise ModelError("actor constraint: no tools to call (Constraint.tools is empty)")
    return {
        "anyOf": [
            {
                "type": "object",
                "properties": {"name": {"const": tool.name}, "arguments": bound_schema(tool.parameters)},
                "required": ["name", "arguments"],
            }
            for tool in tools
        ]
    }


def echo_arguments(response_schema: dict | None, arguments: dict) -> dict | None:
    """The declared response with what the call already fixes pinned: a top-level
    property named as an argument, whose declared shape the argument's value fits, is
    that value (the account id, path or query a tool answers about). The rehearser then
    writes it as forced tokens instead of guessing it, or looping inside it."""
    if not isinstance(response_schema, dict) or not isinstance(response_schema.get("properties"), dict):
        return response_schema
    from jsonschema import Draft202012Validator

    properties = dict(response_schema["properties"])
    for name, value in (arguments or {}).items():
        declared = properties.get(name)
        if isinstance(declared, dict) and Draft202012Validator(declared).is_valid(value):
            properties[name] = {"const": value}
    return {**response_schema, "properties": properties}


def rehearsal_shape(
    response_schema: dict | None, name: str, arguments: dict, known: list, failures: bool = False,
    max_string: int = MAX_RESULT_STRING,
) -> dict | None:
    """The shape a rehearsal of the call ``name(arguments)`` is held to: the declared
    response with the call's own arguments pinned (:func:`echo_arguments`), and its
    failure too where ``failures`` (a model trained to rehearse, see
    :func:`rehearses_failures`) or once the tool has failed for real in this episode
    (``known``: (call, real result) pairs): a declared shape has no error branch, and a
    model shown the failure in its few-shot section could not otherwise say it again."""
    shape = echo_arguments(response_schema, arguments)
    failed = any(call.name == name and isinstance(result, dict) and "error" in result for call, result in known)
    if shape is not None and (failures or failed):
        return {"anyOf": [shape, domain_error_schema(max_string)]}
    return shape


def rehearses_failures(backend) -> bool:
    """Whether ``backend``'s rehearsals may predict a domain failure before one is seen:
    a model trained to rehearse (served with an adapter, or an EnvACE model) learnt when
    the environment refuses a call (the daily limit, a read-only path, a full hold list),
    and predicting that is what rehearsal is for. The untrained embedded model is held to
    the declared shape: offered the failure, it predicted one for nearly every call."""
    return getattr(backend, "adapter", None) is not None or trained_on_contract(backend.info.model_id)


def result_string(trained: bool) -> int:
    """How long a free string of a rehearsed result may be, for a model trained to
    rehearse (:func:`rehearses_failures`) or not: the untrained one loops inside strings."""
    return TRAINED_RESULT_STRING if trained else MAX_RESULT_STRING


def rehearsal_constraint(
    response_schema: dict | None, name: str, arguments: dict, known: list, trained: bool,
    think_chars: int | None = None, failures: bool | None = None,
) -> Constraint:
    """What a rehearsal of ``name(arguments)`` is held to, for a model trained to rehearse
    (:func:`rehearses_failures`) or not: its shape (:func:`rehearsal_shape`) and how long
    its strings may be (:func:`result_string`). ``failures`` (default: ``trained``) offers a
    domain failure no result in ``known`` has shown."""
    longest = result_string(trained)
    failures = trained if failures is None else failures
    shape = rehearsal_shape(response_schema, name, arguments, known, failures=failures, max_string=longest)
    return Constraint(role="rehearser", response_schema=shape, think_chars=think_chars, result_string=longest)


def result_schema(response_schema: dict | None, max_string: int = MAX_RESULT_STRING) -> dict:
    """What the rehearsed result of a call that passed validation may be.

    A declared response is followed as declared: a tool whose failures should be
    predictable declares them in it. (Offered "the declared shape or any domain error",
    the embedded model predicted an error for nearly every call, and its actor then tried
    one tool after another, writes included.) Without a declaration: a bounded generic
    value or a domain failure. The contract's ``error_tool_call`` is never offered: format,
    availability and parameters were already checked by the engine, which writes those
    errors itself."""
    if response_schema is not None:
        return bound_schema(response_schema, max_string, MAX_RESULT_ITEMS, narrow=True)
    return {"anyOf": [generic_result_schema(max_string), domain_error_schema(max_string)]}


def structural_tag(
    constraint: Constraint, max_think_chars: int = MAX_THINK_CHARS, max_calls: int = MAX_CALLS,
    opened: list[int] | None = None,
) -> dict:
    """The xgrammar structural tag for ``constraint``; the bounds of the strings it leaves to
    the decoders are appended to ``opened`` (:func:`escapable_strings`)."""
    import xgrammar as xgr

    def const(text: str) -> dict:
        return {"type": "const_string", "value": text}

    def json_part(schema: dict) -> dict:
        # Embedded as EBNF: the structural tag's own JSON format allows free whitespace.
        try:
            grammar = xgr.Grammar.from_json_schema(schema, any_whitespace=False)
        except RuntimeError as err:
            raise ModelError(
                f"{constraint.role} constraint: xgrammar cannot compile the schema: {err}"
            ) from err
        return {"type": "grammar", "grammar": escapable_strings(str(grammar), opened)}

    think_chars = max_think_chars
    if constraint.role == "rehearser" and constraint.think_chars is None:
        think_chars = min(max_think_chars, MAX_REHEARSER_THINK_CHARS)
    if constraint.think_chars is not None:  # a rehearser trained to state facts asks for more
        think_chars = min(think_chars, constraint.think_chars)
    # A plain EBNF repetition compiles in milliseconds; xgrammar's "tag" format with a
    # bounded any_text, or a "\n" before "</think>", took seconds (ambiguous ends).
    lead = constraint.think_lead or ""
    if lead:
        think_chars = max(think_chars - len(lead), MIN_THINK_AFTER_LEAD)
        lead = " " + json.dumps(lead, ensure_ascii=False)  # an EBNF string is a JSON string
    reasoning = f' [^<]{{0,{think_chars}}}' if think_chars > 0 else ""
    think = {
        "type": "grammar",
        "grammar": f'root ::= "<think>\\n"{lead}{reasoning} "</think>\\n\\n"',
    }
    if not lead:  # a stated lead is the reasoning's start: the reasoning is not optional then
        think = {"type": "optional", "content": think}
    # Non-empty, no tags; bounded where the constraint says (an imagined run's answer).
    bound = "+" if constraint.answer_chars is None else f"{{1,{constraint.answer_chars}}}"
    answer = {"type": "grammar", "grammar": f"root ::= [^<]{bound}"}
    if constraint.role == "actor" and not constraint.tools:
        if constraint.require_call:
            raise ModelError("actor constraint: a call is required but Constraint.tools is empty")
        body: dict = answer
    elif constraint.role == "actor":
        call = {
            "type": "sequence",
            "elements": [const(CALL_OPEN), json_part(call_schema(constraint.tools)), const(CALL_CLOSE)],
        }
        more = {"type": "sequence", "elements": [const("\n"), call]}
        body = call
        if max_calls > 1:
            repeat = {"type": "repeat", "min": 0, "max": max_calls - 1, "content": more}
            body = {"type": "sequence", "elements": [call, repeat]}
        if not constraint.require_call:
            body = {"type": "or", "elements": [body, answer]}
    elif constraint.role == "rehearser":
        body = {
            "type": "sequence",
            "elements": [
                const(RESULT_OPEN),
                json_part(result_schema(constraint.response_schema, constraint.result_string or MAX_RESULT_STRING)),
                const(RESULT_CLOSE),
            ],
        }
    else:
        raise ModelError(f"Constraint.role: {constraint.role!r} is not 'actor' or 'rehearser'")
    return {"type": "structural_tag", "format": {"type": "sequence", "elements": [think, body]}}


def constraint_key(
    constraint: Constraint, max_think_chars: int = MAX_THINK_CHARS, max_calls: int = MAX_CALLS
) -> str:
    """Everything the grammar depends on (tool descriptions do not matter; key order
    does: it fixes the order of properties in the output)."""
    return json.dumps(
        [
            constraint.role,
            constraint.require_call,
            constraint.response_schema,
            [[tool.name, tool.parameters] for tool in constraint.tools]
            if constraint.role == "actor"
            else None,
            max_think_chars,
            max_calls,
            constraint.think_chars,
            constraint.result_string,
            constraint.answer_chars,
            constraint.think_lead,
        ],
        ensure_ascii=False,
    )


# ---------------------------------------------------------------------------------
# Compilation against one tokenizer


class GrammarCache:
    """Compiles constraints for one tokenizer and keeps the recent ones.

    ``vocab_size`` is the model's (its logits' width), which may exceed the
    tokenizer's; ``stop_token_ids`` are what may follow a complete output.
    ``max_think_chars`` and ``max_calls`` (per actor turn) bound the output: a small
    model repeats its call until the token budget cuts the last one in half.
    """

    def __init__(
        self,
        tokenizer,
        vocab_size: int,
        stop_token_ids: list[int],
        max_think_chars: int = MAX_THINK_CHARS,
        max_calls: int = MAX_CALLS,
        max_entries: int = 64,
    ):
        import xgrammar as xgr

        info = xgr.TokenizerInfo.from_huggingface(
            tokenizer, vocab_size=vocab_size, stop_token_ids=stop_token_ids
        )
        self._compiler = xgr.GrammarCompiler(info)
        self.stop_token_ids = list(stop_token_ids)
        if max_calls < 1 or max_think_chars < 0:
            raise ModelError(
                f"grammar: max_calls must be ≥ 1 and max_think_chars ≥ 0, got {max_calls}, {max_think_chars}"
            )
        self.max_think_chars = max_think_chars
        self.max_calls = max_calls
        self.max_entries = max_entries
        self._entries: OrderedDict[str, xgrammar.CompiledGrammar] = OrderedDict()
        self._string_chars: dict[str, int | None] = {}  # per entry: see ``string_chars``
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def compile(self, constraint: Constraint) -> xgrammar.CompiledGrammar:
        key = constraint_key(constraint, self.max_think_chars, self.max_calls)
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                self.hits += 1
                return self._entries[key]
        opened: list[int] = []
        tag = structural_tag(constraint, self.max_think_chars, self.max_calls, opened)
        try:
            compiled = self._compiler.compile_structural_tag(tag)
        except (RuntimeError, ValueError) as err:
            raise ModelError(f"{constraint.role} constraint: xgrammar cannot compile it: {err}") from err
        with self._lock:
            self.misses += 1
            self._entries[key] = compiled
            self._string_chars[key] = max(opened, default=None)
            while len(self._entries) > self.max_entries:
                dropped, _ = self._entries.popitem(last=False)
                self._string_chars.pop(dropped, None)
        return compiled

    def string_chars(self, constraint: Constraint) -> int | None:
        """How long a string of ``constraint``'s output may grow before the decoder closes it:
        the longest bound its grammar left open (``escapable_strings``); None where it left
        none. Compiles the constraint if it is not compiled yet."""
        key = constraint_key(constraint, self.max_think_chars, self.max_calls)
        with self._lock:
            if key in self._string_chars:
                return self._string_chars[key]
        self.compile(constraint)
        with self._lock:
            return self._string_chars.get(key)

    def logits_processor(self, constraint: Constraint):
        """A fresh transformers LogitsProcessor (one per ``generate`` call: it keeps
        per-row matcher state)."""
        from xgrammar.contrib.hf import LogitsProcessor

        return LogitsProcessor(self.compile(constraint))
