"""Typed errors. Each message is written for the person who caused it."""

from __future__ import annotations


class EnvaceError(Exception):
    """Base class: ``str(err)`` is a complete, user-facing message."""


class SchemaError(EnvaceError):
    """A tool schema (or a list of them) is invalid.

    ``location`` is a JSONPath-like pointer into what the user pasted, e.g.
    ``tools[2].parameters.properties.unit.type``.
    """

    def __init__(self, location: str, problem: str):
        self.location = location
        self.problem = problem
        super().__init__(f"{location}: {problem}" if location else problem)


class ToolCallError(EnvaceError):
    """The actor's output could not be turned into tool calls.

    ``code`` is one of the contract's codes (method doc §2).
    """

    CODES = (
        "NO_TOOL_CALL_FOUND",
        "JSON_DECODE_ERROR",
        "NO_ARGUMENTS",
        "NON_SERIALIZABLE_ARGUMENTS",
        "INVALID_TOOL_NAME",
    )

    def __init__(self, code: str, message: str):
        assert code in self.CODES, code
        self.code = code
        super().__init__(f"{code}: {message}")


class InputError(EnvaceError):
    """A file or upload the user gave cannot be read: too large, not UTF-8, unreadable."""


class TaskError(InputError):
    """A task file or task record is invalid."""


class ModelError(EnvaceError):
    """A model could not be loaded or run."""


class ConfigError(EnvaceError):
    """A setting is invalid; the message says which one and what to set."""


class EnvironmentNotFound(EnvaceError):
    """No environment of that name."""


class StorageError(EnvaceError):
    """A file could not be written (full disk, no permission); names the file and the cause."""

    def __init__(self, what: str, path: object, cause: OSError):
        self.path = path
        super().__init__(f"could not save the {what} to {path}: {cause.strerror or cause}")
