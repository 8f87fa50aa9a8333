"""Closing a constrained value at its token budget, for both decoders (the row decoder and
the batched ``model.generate`` path).

A constrained value is never cut mid-way by the token budget: in its last ``CLOSING_TOKENS``
tokens, once a call or a result is open, only tokens that close it are sampled wherever
the grammar allows one (``closing_ids``): inside a string its closing quote, outside
``]`` and ``}``; then the closing tag and the stop token. A call that would repeat array
items until the limit then ends as a shorter, whole call. (Where the grammar still
requires more, a required key, the model goes on.)
"""

from __future__ import annotations

# The last tokens of a constrained row's budget, in which an open value is closed: room for
# what the value still requires (a declared response's last required keys), a nested
# value's closers, its closing tag (several tokens where the tokenizer has no special
# token for it) and the stop token. With 24, one rehearsal of the embedded model in eight
# closed its value but lost its closing tag to the limit.
CLOSING_TOKENS = 32
# Characters that close a JSON value (whitespace is left out: inside a string it would
# only lengthen it), and the tags an open call or result ends with.
_CLOSERS = frozenset('"]}')
OPEN_TAGS = {"<tool_call>": "</tool_call>", "<execution_result>": "</execution_result>"}


def value_open(text: str) -> bool:
    """Whether ``text`` (an output so far) ends inside a call or a result: its last opening
    tag has no closing tag after it."""
    last = max(OPEN_TAGS, key=text.rfind)
    at = text.rfind(last)
    return at >= 0 and OPEN_TAGS[last] not in text[at:]


def in_string(text: str) -> bool:
    """Whether ``text`` ends inside a JSON string of the value its last opening tag began."""
    return open_string(text) is not None


def open_string(text: str) -> int | None:
    """How many characters the JSON string ``text`` ends inside holds so far (an escape
    counts one), in the value its last opening tag began; None outside a string."""
    last = max(OPEN_TAGS, key=text.rfind)
    length: int | None = None
    escaped = False
    for char in text[text.rfind(last) + len(last):]:
        if escaped:
            escaped = False
        elif char == "\\" and length is not None:
            escaped = True
            length += 1
        elif char == '"':
            length = 0 if length is None else None
        elif length is not None:
            length += 1
    return length


def closable(text: str) -> bool:
    """Whether the budget's last tokens should close rather than go on: a call or a result
    is open, or one is complete (then the stop token beats a next call the budget would cut)."""
    return value_open(text) or any(close in text for close in OPEN_TAGS.values())


def close_scores(scores, closers, text: str, ending: bool = True, string_chars: int | None = None):
    """``scores`` (one row) with every token but the closers removed where ``text`` (the
    output so far) should close and the grammar allows a closer; unchanged otherwise (the
    value needs more first). It should close in the budget's last tokens (``ending``) and,
    anywhere, inside a string of ``string_chars`` characters or more. ``closers``: (in a
    string, outside one), from ``closer_tensors``."""
    import torch

    length = open_string(text)
    long_string = string_chars is not None and length is not None and length >= string_chars
    if not long_string and not (ending and closable(text)):
        return scores
    closers = closers[0] if length is not None else closers[1]
    allowed = torch.isfinite(scores[0, closers])
    if not bool(allowed.any()):
        return scores
    kept = torch.full_like(scores, float("-inf"))
    kept[0, closers] = scores[0, closers]
    return kept


def closing_ids(tokenizer, stop_ids: list[int], tags: tuple[str, ...]) -> tuple[list[int], list[int]]:
    """The tokens that close a value, (inside a string, outside one): text of ``"``, ``]``
    and ``}`` only, starting with the quote inside a string (``]`` there would only lengthen
    it) and without one outside (it would open a new string); both with the closing tags
    the tokenizer has one token for, and the stop tokens."""
    closing_tags = {t for t in tags if t in OPEN_TAGS.values()}
    inside, outside = set(stop_ids), set(stop_ids)
    for token, index in tokenizer.get_vocab().items():
        if not (set(token) <= _CLOSERS or token in closing_tags):  # a byte-level token spells them as is
            continue
        text = tokenizer.convert_tokens_to_string([token])
        if text in closing_tags:
            inside.add(index)
            outside.add(index)
        elif text and set(text) <= _CLOSERS:
            (inside if text.startswith('"') else outside if '"' not in text else set()).add(index)
    return sorted(inside), sorted(outside)


def closer_tensors(closers, device):
    """The two closer lists as id tensors on ``device``; None without closers."""
    import torch

    if not closers or not closers[0]:
        return None
    return tuple(torch.tensor(ids, dtype=torch.long, device=device) for ids in closers)
