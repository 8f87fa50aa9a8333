"""The wire format of both roles: parse the actor's raw output into tool calls
(method doc §2) and the rehearser's output into a JSON result (method doc §3).

Parsing is tolerant of the slips models make (a missing newline, a list of calls in
one block, ``parameters`` for ``arguments``, arguments as a JSON string, a final
block cut off by a stop, code fences) and strict about everything else: a failure is
one of the contract's error codes, as in training, where each ended the episode.

All scanning is ``str.find`` based (linear time, no backtracking) so that adversarial
text such as a megabyte of ``<tool_call>`` costs milliseconds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any

from envace_demo.errors import ToolCallError
from envace_demo.record import Action, ToolCall
from envace_demo.strict_json import NonFiniteNumber, finite_float, refuse_constant

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
RESULT_OPEN, RESULT_CLOSE = "<execution_result>", "</execution_result>"

#: More calls than this in one turn is a runaway generation, reported as
#: JSON_DECODE_ERROR (the output is garbage, not a plan worth executing).
MAX_CALLS = 64
#: Deeper JSON than this is reported as JSON_DECODE_ERROR: no tool needs it, and it
#: would overflow the recursion of later consumers (json.dumps, jsonschema).
MAX_DEPTH = 64

# An opening code fence with an optional language tag; anchored, no nesting.
_FENCE_OPEN = re.compile(r"\A```[A-Za-z0-9_+-]*")


# ---------------------------------------------------------------------------------
# Reasoning


def split_thinking(text: str, thinking_open: bool = False) -> tuple[str, str]:
    """Split ``text`` into ``(thinking, rest)``, both stripped.

    Handles ``<think>…</think>rest``; output that starts inside the reasoning
    because the prompt ended with ``<think>`` (``…</think>rest``); an unclosed
    ``<think>`` (everything after it is thinking); several think blocks; none at
    all. ``thinking_open=True`` says the prompt ended inside ``<think>``, so text
    with no tag at all is unfinished reasoning, not an answer.
    """
    thoughts: list[str] = []
    visible: list[str] = []
    first_open = text.find(THINK_OPEN)
    first_close = text.find(THINK_CLOSE)
    pos = 0
    if first_close != -1 and (first_open == -1 or first_close < first_open):
        # The opening tag was in the prompt: the output begins inside the reasoning.
        thoughts.append(text[:first_close])
        pos = first_close + len(THINK_CLOSE)
    elif first_close == -1 and first_open == -1 and thinking_open:
        return text.strip(), ""
    while True:
        start = text.find(THINK_OPEN, pos)
        if start == -1:
            visible.append(text[pos:])
            break
        visible.append(text[pos:start])
        end = text.find(THINK_CLOSE, start + len(THINK_OPEN))
        if end == -1:  # unclosed: the generation stopped while reasoning
            thoughts.append(text[start + len(THINK_OPEN) :])
            break
        thoughts.append(text[start + len(THINK_OPEN) : end])
        pos = end + len(THINK_CLOSE)
    thinking = "\n\n".join(t.strip() for t in thoughts if t.strip())
    return thinking, "".join(visible).strip()


# ---------------------------------------------------------------------------------
# JSON helpers


class _TooDeep(Exception):
    pass


def _check_depth(value: Any, limit: int = MAX_DEPTH) -> None:
    # Iterative, so the check itself cannot overflow the stack.
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            raise _TooDeep()
        stack.extend((child, depth + 1) for child in children)


def _loads(text: str) -> Any:
    """json.loads that rejects NaN/Infinity (``NonFiniteNumber``) and deep nesting
    (``_TooDeep``); other failures raise ``ValueError``."""
    try:
        value = json.loads(text, parse_constant=refuse_constant, parse_float=finite_float)
    except RecursionError as err:
        raise _TooDeep() from err
    _check_depth(value)
    return value


def _unfence(text: str) -> str:
    """Strip surrounding whitespace and a Markdown code fence, if any."""
    text = text.strip()
    fence = _FENCE_OPEN.match(text)
    if fence:
        text = text[fence.end() :]
        if text.endswith("```"):
            text = text[:-3]
        text = text.strip()
    return text


def _kind(value: Any) -> str:
    """The JSON type name of a decoded value, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


# ---------------------------------------------------------------------------------
# Actor output


_DECODER = json.JSONDecoder()
_SPACE = " \t\r\n"


def _json_end(text: str, pos: int) -> int | None:
    """Where a JSON object or array starting at ``pos`` (after blanks) ends, or None."""
    while pos < len(text) and text[pos] in _SPACE:
        pos += 1
    if pos >= len(text) or text[pos] not in "{[":
        return None
    try:
        return _DECODER.raw_decode(text, pos)[1]
    except (ValueError, RecursionError):
        return None


def _split_calls(rest: str) -> tuple[str, list[str]]:
    """The visible text and the raw contents of the ``<tool_call>`` blocks in ``rest``.

    A block ends at ``</tool_call>``, at the next ``<tool_call>`` (a forgotten
    closing tag) or at the end of the text (the model hit a stop). Scanning stops
    after ``MAX_CALLS + 1`` blocks: the caller reports the overflow.
    """
    visible: list[str] = []
    blocks: list[str] = []
    pos = 0
    close = 0  # position of the next closing tag, -1 once there is none left
    while len(blocks) <= MAX_CALLS:
        start = rest.find(CALL_OPEN, pos)
        if start == -1:
            break
        visible.append(rest[pos:start])
        body = start + len(CALL_OPEN)
        end = _json_end(rest, body)
        if end is not None:
            # A well-formed JSON body ends the block even when one of its strings
            # contains "</tool_call>".
            after = end
            while after < len(rest) and rest[after] in _SPACE:
                after += 1
            if rest.startswith(CALL_CLOSE, after):
                blocks.append(rest[body:after])
                pos = after + len(CALL_CLOSE)
                continue
        if close != -1 and close < body:  # search again only when we passed it
            close = rest.find(CALL_CLOSE, body)
        reopen = rest.find(CALL_OPEN, body)
        if close != -1 and (reopen == -1 or close < reopen):
            blocks.append(rest[body:close])
            pos = close + len(CALL_CLOSE)
        elif reopen != -1:
            blocks.append(rest[body:reopen])
            pos = reopen
        else:
            blocks.append(rest[body:])
            pos = len(rest)
    visible.append(rest[pos:])
    return "".join(visible).strip(), blocks


def _fail(code: str, message: str) -> ToolCallError:
    return ToolCallError(code, message)


def _decode_block(raw: str, where: str) -> Any:
    body = _unfence(raw)
    if not body:
        raise _fail("JSON_DECODE_ERROR", f"{where}: the block is empty")
    try:
        return _loads(body)
    except NonFiniteNumber as err:
        raise _fail(
            "NON_SERIALIZABLE_ARGUMENTS",
            f"{where}: {err.token} is not a JSON value (NaN and Infinity are not allowed)",
        ) from None
    except _TooDeep:
        raise _fail("JSON_DECODE_ERROR", f"{where}: JSON nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as err:
        raise _fail("JSON_DECODE_ERROR", f"{where}: not valid JSON: {err}") from None


def _to_call(obj: Any, where: str, tool_names: Collection[str] | None) -> ToolCall:
    if not isinstance(obj, dict):
        raise _fail(
            "JSON_DECODE_ERROR",
            f'{where}: expected an object {{"name": ..., "arguments": {{...}}}}, got a {_kind(obj)}',
        )
    name = obj.get("name")
    if name is None:
        raise _fail("INVALID_TOOL_NAME", f'{where}: the call has no "name"')
    if not isinstance(name, str) or not name.strip():
        raise _fail(
            "INVALID_TOOL_NAME", f'{where}: "name" must be a non-empty string, got {json.dumps(name)}'
        )
    name = name.strip()
    if "arguments" in obj:
        args = obj["arguments"]
    elif "parameters" in obj:  # some outputs of the trained model use this key
        args = obj["parameters"]
    else:
        raise _fail("NO_ARGUMENTS", f'{where} ({name}): the call has no "arguments"')
    if isinstance(args, str):  # arguments encoded as a JSON string, OpenAI style
        try:
            args = _loads(args)
        except NonFiniteNumber as err:
            raise _fail(
                "NON_SERIALIZABLE_ARGUMENTS",
                f"{where} ({name}): {err.token} is not a JSON value (NaN and Infinity are not allowed)",
            ) from None
        except _TooDeep:
            raise _fail(
                "JSON_DECODE_ERROR", f"{where} ({name}): arguments nested deeper than {MAX_DEPTH} levels"
            ) from None
        except ValueError as err:
            raise _fail(
                "JSON_DECODE_ERROR", f"{where} ({name}): the arguments string is not JSON: {err}"
            ) from None
    if not isinstance(args, dict):
        raise _fail(
            "NON_SERIALIZABLE_ARGUMENTS",
            f'{where} ({name}): "arguments" must be a JSON object, got a {_kind(args)}',
        )
    if tool_names is not None and name not in tool_names:
        known = sorted(tool_names)
        shown = ", ".join(known[:12]) + (", …" if len(known) > 12 else "")
        raise _fail("INVALID_TOOL_NAME", f"{where}: no tool named {name!r} (available: {shown or 'none'})")
    return ToolCall(name=name, arguments=args)


def parse_calls(rest: str, tool_names: Collection[str] | None = None) -> tuple[str, list[ToolCall]]:
    """``(visible content, calls)`` of text that is already free of reasoning.

    Raises ``ToolCallError`` on the first malformed block; blocks are numbered from 1
    in messages ("tool_call #2: ..."), items of a list in a block from 1 as well.
    """
    content, blocks = _split_calls(rest)
    if len(blocks) > MAX_CALLS:
        raise _fail("JSON_DECODE_ERROR", f"more than {MAX_CALLS} <tool_call> blocks in one turn")
    calls: list[ToolCall] = []
    for number, raw in enumerate(blocks, start=1):
        where = f"tool_call #{number}"
        decoded = _decode_block(raw, where)
        if isinstance(decoded, list):
            if not decoded:
                raise _fail("JSON_DECODE_ERROR", f"{where}: an empty list holds no call")
            items = [(f"{where} item {i}", item) for i, item in enumerate(decoded, start=1)]
        else:
            items = [(where, decoded)]
        for label, item in items:
            calls.append(_to_call(item, label, tool_names))
            if len(calls) > MAX_CALLS:
                raise _fail("JSON_DECODE_ERROR", f"more than {MAX_CALLS} tool calls in one turn")
    return content, calls


def parse_action(
    text: str,
    tool_names: Collection[str] | None = None,
    *,
    require_call: bool = False,
    thinking_open: bool = False,
    cut: bool = False,
) -> Action:
    """Parse one actor output. Never raises for bad model output.

    ``tool_names``: the accepted names (pass both safe and original forms); None
    accepts any name. ``require_call``: a turn without a call is an error
    (``NO_TOOL_CALL_FOUND``) instead of a final answer. ``thinking_open``: the
    prompt ended with ``<think>`` (see ``split_thinking``).

    On any error ``calls`` is empty: in training each error ended the episode, so a
    turn with one bad block executes nothing.

    ``cut``: the generation was stopped by the token limit, not by the model. A last block
    it cut off before its closing tag is then dropped when complete calls precede it: the
    model did not write a bad call, the budget ended it (a small model under a grammar
    repeats its call until the limit cuts the last one in half).
    """
    thinking, rest = split_thinking(text, thinking_open)
    if cut:
        rest = _drop_cut_block(rest)
    action = Action(text=text, thinking=thinking)
    try:
        action.content, action.calls = parse_calls(rest, tool_names)
        if require_call and not action.calls:
            raise _fail("NO_TOOL_CALL_FOUND", "the turn has no <tool_call> block outside the reasoning")
    except ToolCallError as err:
        action.content = _split_calls(rest)[0]
        action.calls = []
        action.error = err.code
        action.error_message = str(err).removeprefix(f"{err.code}: ")
    return action


def _drop_cut_block(rest: str) -> str:
    """``rest`` without a final ``<tool_call>`` block that has no closing tag, provided an
    earlier block is closed (otherwise the cut block is all there is, and its error stands)."""
    last = rest.rfind(CALL_OPEN)
    if last <= 0 or rest.find(CALL_CLOSE, last) != -1:
        return rest
    if rest.rfind(CALL_CLOSE, 0, last) == -1:
        return rest
    return rest[:last].rstrip()


def format_call(call: ToolCall) -> str:
    """A call as the Qwen3 template writes it in a conversation history."""
    payload = json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)
    return f"{CALL_OPEN}\n{payload}\n{CALL_CLOSE}"


# ---------------------------------------------------------------------------------
# Rehearser output


def parse_execution_result(text: str, thinking_open: bool = False) -> tuple[Any, str | None]:
    """``(result, None)`` or ``(None, error message)`` for one rehearser output.

    Expects ``<think>…</think>`` then ``<execution_result>\\n{JSON}\\n</execution_result>``;
    tolerates missing newlines, a missing closing tag and code fences. Only the
    first block counts. The result must be a non-empty JSON object or array.
    """
    _, rest = split_thinking(text, thinking_open)
    start = rest.find(RESULT_OPEN)
    if start == -1:
        return None, f"no {RESULT_OPEN} block"
    body_start = start + len(RESULT_OPEN)
    end = rest.find(RESULT_CLOSE, body_start)
    body = _unfence(rest[body_start:] if end == -1 else rest[body_start:end])
    if not body:
        return None, "empty result"
    try:
        value = _loads(body)
    except NonFiniteNumber as err:
        return None, f"not JSON: {err.token} is not a JSON value"
    except _TooDeep:
        return None, f"not JSON: nested deeper than {MAX_DEPTH} levels"
    except ValueError as err:
        return None, f"not JSON: {err}"
    if not isinstance(value, (dict, list)):
        return None, f"expected a JSON object or array, got a {_kind(value)}"
    if not value:
        return None, "empty result"
    return value, None
