"""What the loaders accept: one policy object, passed to every loader of user input.

Tool schemas, task files, BFCL records and uploads are all read through
:func:`read_user_file` and checked against the same :class:`InputPolicy`, so a cap
set for the app cannot be bypassed by reaching a loader some other way.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Callable

from envace_demo.errors import ConfigError, InputError

_MB = 1_000_000


@dataclass(frozen=True)
class InputPolicy:
    """Bounds that keep a hostile or mistaken input from hanging a loader or the model queue."""

    max_bytes: int = _MB  # one tool list: its text, and its schemas after inlining $refs
    max_tools: int = 128
    max_depth: int = 32  # nesting of JSON containers, in the input and in each normalized schema
    max_properties: int = 512  # per object schema
    max_refs: int = 1000  # $ref expansions in one tool list
    max_file_bytes: int = 100 * _MB  # a task file or an upload, as a whole
    max_tasks: int | None = None  # tasks read from one file; None: all
    # A task's prompt, in bytes (checked as it is read) and in tokens (where a tokenizer is
    # at hand): tokenizing and prefill run under the model's lock and cannot be interrupted.
    max_prompt_bytes: int | None = None
    max_prompt_tokens: int | None = None
    # A suite's total work, tasks x seeds x modes episodes; None: no cap.
    max_suite_episodes: int | None = None
    # A "pattern" runs in Python's backtracking regex engine ("^(a+)+$" on 30 characters takes
    # minutes); where visitors are untrusted only the operator's own patterns are accepted.
    allow_regex: bool = True
    trusted_patterns: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type in ("int", "int | None") and not (value is None and f.type == "int | None"):
                if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                    raise ConfigError(f"InputPolicy.{f.name} must be a positive integer, got {value!r}")

    def regex_refused(self, pattern: str) -> bool:
        return not self.allow_regex and pattern not in self.trusted_patterns

    def check_prompt(self, text: str, where: str, count_tokens: Callable[[str], int] | None = None) -> None:
        """InputError unless ``text`` fits the prompt caps: bytes first (a length, no work), then,
        with ``count_tokens``, tokens (on text already known to be at most max_prompt_bytes)."""
        if self.max_prompt_bytes is not None:
            # len() in characters is a lower bound on the UTF-8 size: no encoding of a huge text.
            size = len(text) if len(text) > self.max_prompt_bytes else len(text.encode("utf-8", "surrogatepass"))
            if size > self.max_prompt_bytes:
                raise InputError(f"{where}: the prompt is {size:,} bytes, at most {self.max_prompt_bytes:,}")
        if count_tokens is not None and self.max_prompt_tokens is not None:
            tokens = count_tokens(text)
            if tokens > self.max_prompt_tokens:
                raise InputError(f"{where}: the prompt is {tokens:,} tokens, at most {self.max_prompt_tokens:,}")

    def check_work(self, tasks: int, seeds: int, modes: int) -> None:
        """ConfigError when a suite of ``tasks`` x ``seeds`` x ``modes`` episodes is over the cap."""
        episodes = tasks * seeds * modes
        if self.max_suite_episodes is not None and episodes > self.max_suite_episodes:
            raise ConfigError(
                f"suite: {tasks} tasks x {seeds} seeds x {modes} modes = {episodes} episodes, "
                f"at most {self.max_suite_episodes}; fewer tasks, seeds or modes"
            )


DEFAULT_POLICY = InputPolicy()


def decode_text(data: bytes, where: str) -> str:
    """UTF-8 text (a BOM is dropped), or an InputError naming the line and column of the bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        raise InputError(
            f"{where}: not UTF-8 text (byte 0x{data[err.start]:02x} at line {line}, column {column}); "
            "save the file as UTF-8"
        ) from None


def read_user_file(path: str | Path, policy: InputPolicy = DEFAULT_POLICY, where: str | None = None) -> str:
    """The text of a file the user gave: size-checked, strictly UTF-8, errors naming the file."""
    path = Path(path)
    where = where or path.name
    try:
        size = path.stat().st_size
        if size > policy.max_file_bytes:
            raise InputError(f"{where}: too large: {size:,} bytes, at most {policy.max_file_bytes:,}")
        data = path.read_bytes()
    except OSError as err:
        raise InputError(f"{where}: cannot read ({err.strerror or err})") from None
    return decode_text(data, where)
