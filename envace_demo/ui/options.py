"""What the app allows, derived from the settings (no environment reads here)."""

from __future__ import annotations

import re
import sys
import tempfile
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

from envace_demo.policy import InputPolicy
from envace_demo.redaction import SECRET, Redactor
from envace_demo.settings import PROJECT_ROOT, Settings, default_of

SERVER_PATH = "<server path>"
PUBLIC_CLIENT_JOBS = 2  # a Space's visitor: one running, one waiting


@dataclass(frozen=True)
class UIOptions:
    """Caps and queue sizes. Public mode (a Space) keeps visitors from hogging the model.

    Every cap is enforced again on the server side: API callers bypass the sliders.
    """

    concurrency: int = default_of(Settings, "concurrency")  # model work at once: run, compare and suite share it
    queue_size: int = default_of(Settings, "queue_size")  # waiting requests before new ones are refused
    client_jobs: int | None = None  # model jobs one client address may have waiting or running
    max_n: int = 16
    max_new_tokens: int = 2048
    max_steps: int = 12
    max_suite_tasks: int = 64
    allow_model_switch: bool = True
    model_wait_seconds: float = 900.0  # how long a request waits for the model to load
    max_input_bytes: int = default_of(InputPolicy, "max_bytes")  # a pasted schema: the loader's own bound
    max_tools: int = default_of(InputPolicy, "max_tools")
    max_message_bytes: int = 100_000  # a prompt typed, sent or uploaded (every task of a suite)
    max_prompt_tokens: int | None = None  # the same prompt in the model's tokens
    max_suite_episodes: int | None = None  # a suite's tasks x seeds x modes
    # A visitor's "pattern" runs in Python's backtracking regex engine: "^(a+)+$" against 30
    # characters takes minutes, and would hold the one model queue for everybody.
    allow_regex: bool = True
    allow_training: bool = True
    # A person typing a real response holds the one model queue meanwhile: not for a shared Space.
    allow_manual: bool = True
    manual_seconds: float = default_of(Settings, "manual_seconds")  # how long a committed call waits for its typed response
    public: bool = False
    # The operator's MCP servers (label -> command or URL); visitors pick among these only.
    mcp_servers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    mcp_timeout: float = default_of(Settings, "mcp_timeout")
    # What no visitor may see: (value, placeholder) pairs (api key, model server, MCP servers),
    # and server folders, each hidden with whatever path follows it.
    hidden: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    hidden_folders: tuple[str, ...] = field(default=(), repr=False)

    @classmethod
    def from_settings(cls, settings: Settings) -> "UIOptions":
        from envace_demo.envs.mcp import configured_servers

        shared = {
            "concurrency": settings.concurrency,
            "queue_size": settings.queue_size,
            # Visitors see "server-N" only: a command line or URL may hold a token.
            "mcp_servers": tuple(
                (f"server-{i + 1}", command) for i, command in enumerate(configured_servers(settings.mcp_servers).values())
            ),
            "mcp_timeout": settings.mcp_timeout,
            "manual_seconds": settings.manual_seconds,
        }
        if settings.public:
            return cls(
                **shared,
                max_n=4,
                max_new_tokens=settings.max_new_tokens,
                max_steps=settings.max_steps,
                max_suite_tasks=8,
                client_jobs=settings.client_jobs or PUBLIC_CLIENT_JOBS,
                allow_model_switch=False,
                max_input_bytes=settings.max_input_bytes,
                max_tools=settings.max_tools,
                max_message_bytes=4_096,
                max_prompt_tokens=1_024,
                max_suite_episodes=24,
                allow_regex=False,
                allow_training=False,
                allow_manual=False,
                public=True,
                hidden=_hidden(settings),
                hidden_folders=_server_folders(settings),
            )
        # Private: the caps above, raised to the operator's own settings where those are higher.
        return cls(
            **shared,
            client_jobs=settings.client_jobs,
            max_new_tokens=max(default_of(cls, "max_new_tokens"), settings.max_new_tokens),
            max_steps=max(default_of(cls, "max_steps"), settings.max_steps),
        )

    @cached_property
    def input_policy(self) -> InputPolicy:
        """What every loader behind the app accepts: pasted schemas, uploads, task files."""
        from envace_demo.envs.registry import builtin_patterns

        return InputPolicy(
            max_bytes=self.max_input_bytes,
            max_tools=self.max_tools,
            max_file_bytes=max(
                self.max_input_bytes, 10_000_000 if self.public else default_of(InputPolicy, "max_file_bytes")
            ),
            max_tasks=self.max_suite_tasks if self.public else None,
            max_prompt_bytes=self.max_message_bytes,
            max_prompt_tokens=self.max_prompt_tokens,
            max_suite_episodes=self.max_suite_episodes,
            allow_regex=self.allow_regex,
            trusted_patterns=builtin_patterns(),
        )

    def redact(self, value: Any) -> Any:
        """``value`` (a message, or a record: strings inside dicts and lists) as a visitor may
        see it: in public mode without server folders, secrets or server addresses."""
        if not self.public:
            return value
        return self._redactor(value)

    @cached_property
    def _redactor(self) -> Redactor:
        # Structural: each hidden URL or command is taken apart (envace_demo.redaction).
        folders = self.hidden_folders

        def hide_folders(text: str) -> str:
            return _folder_pattern(folders).sub(SERVER_PATH, text) if folders else text

        return Redactor(servers=self.hidden, extra=(hide_folders,))


def _hidden(settings: Settings) -> tuple[tuple[str, str], ...]:
    pairs = [(settings.api_key or "", SECRET), (settings.base_url or "", "<model server>")]
    pairs += [(spec, "<MCP server>") for spec in settings.mcp_servers]
    return tuple((value, placeholder) for value, placeholder in pairs if value)


def _server_folders(settings: Settings) -> tuple[str, ...]:
    folders = {str(PROJECT_ROOT), str(settings.cache_dir), sys.prefix, sys.base_prefix, sys.exec_prefix}
    folders.add(tempfile.gettempdir())
    return tuple(sorted((f.rstrip("/") for f in folders if f.rstrip("/")), key=len, reverse=True))


@lru_cache(maxsize=8)
def _folder_pattern(folders: tuple[str, ...]) -> re.Pattern:
    # A folder, not a longer name that starts the same ("/tmpl"), and the rest of its path.
    alternatives = "|".join(re.escape(f) for f in folders)
    return re.compile(rf"(?:{alternatives})(?![\w.-])(?:/[^\s'\"<>()\[\],;:]*)?")
