"""Secrets out of what people see: one structural redaction for URLs, command lines and text.

Matching exact substrings misses the forms a secret takes on its way into a message (a
trailing slash, ``--token=x`` where ``--token x`` was configured, ``host:port/path``
where a URL was, a query token in an HTTP library's error). So each configured value is
taken apart instead: a URL into its server (scheme, host, port), its user info and its
query values; a command line, split like a shell would, into the values of its secret
flags (``--token``, ``--api-key=``, ``PASSWORD=``...). A text is then rewritten:

- every URL in it loses its user info and its query values (``<secret>``), and a URL or
  ``host:port`` of a hidden server becomes that server's placeholder;
- every secret value, and its URL-encoded form, becomes ``<secret>``;
- a ``key=value`` or ``key: value`` whose key names a credential keeps the key only;
- credentials recognizable by their form (``hf_...``, ``sk-...``, bearer tokens) go too.

:func:`public_url` is the form a URL is stored in: server and path, nothing else.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any
from urllib.parse import quote, quote_plus, urlsplit, urlunsplit

SECRET = "<secret>"
MIN_SECRET = 8  # a shorter "secret" (an api_key of "none") would blot out ordinary words

_SECRET_WORD = (
    r"(?:token|api[_-]?key|apikey|key|secret|passw(?:or)?d|pwd|auth|authorization|credentials?"
    r"|bearer|cookie|session|signature|sig)"
)
# A flag naming a credential: --token, --api-key, -password, --hf-token, --auth-header...
_SECRET_FLAG = re.compile(rf"(?i)^-{{1,2}}(?:[\w-]*[_-])?{_SECRET_WORD}(?:[_-][\w-]*)?$")
# An environment assignment naming one: HF_TOKEN=..., API_KEY=..., DB_PASSWORD=...
_SECRET_ENV = re.compile(rf"(?i)^(?:[A-Z0-9]*_)?{_SECRET_WORD}(?:_[A-Z0-9]*)?$")
_URL = re.compile(r"(?i)\b[a-z][a-z0-9+.-]{1,15}://[^\s'\"<>`]+")
# key=value / key: value / "key": "value" where the key names a credential (narrower than
# a flag: "key" alone or "session" are ordinary field names in a record).
_KEY_WORD = (
    r"(?:token|api[_-]?key|apikey|access[_-]?key|secret[_-]?key|secret|passw(?:or)?d|authorization"
    r"|credentials?)"
)
_KEY_VALUE = re.compile(
    rf"""(?ix)(["']?\b(?:[\w-]*[_-])?{_KEY_WORD}["']?\s*[=:]\s*)(?!<)(["']?)(?!\s)([^\s"',;&)}}\]]{{4,}})"""
)
# Credentials that look like one whoever issued them (Hugging Face, OpenAI-style, bearer headers).
_TOKEN = re.compile(r"\bhf_[A-Za-z0-9]{16,}|\bsk-[A-Za-z0-9_-]{16,}|(?i:\bbearer\s+)[A-Za-z0-9._~+/-]{8,}=*")


def public_url(url: str) -> str:
    """``scheme://host[:port]/path``: no user info, no query, no fragment, no trailing slash.
    A value that does not parse as a URL comes back as ``<secret>`` rather than as it was."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return SECRET
    if not parts.scheme or not parts.hostname:
        return SECRET
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    netloc = f"{host}:{port}" if port else host
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def url_secrets(url: str) -> list[str]:
    """A URL's credentials: its user name and password, and its query values."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    found = [v for v in (parts.username, parts.password) if v]
    for pair in parts.query.split("&"):
        _, _, value = pair.partition("=")
        if value:
            found.append(value)
    return found


def command_secrets(command: str) -> list[str]:
    """The secret values a command line holds: the values of credential flags (``--token x``,
    ``--token=x``), of credential assignments (``HF_TOKEN=x``), and the credentials of URLs."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    found: list[str] = []
    for i, word in enumerate(words):
        name, eq, value = word.partition("=")
        if eq and (_SECRET_FLAG.match(name) or _SECRET_ENV.match(name)):
            found.append(value)
        elif _SECRET_FLAG.match(word) and i + 1 < len(words) and not words[i + 1].startswith("-"):
            found.append(words[i + 1])
        for url in _URL.findall(word):
            found += url_secrets(url)
    return found


def safe_command(command: str) -> str:
    """A command line with its secret values replaced: safe to show as a server's label."""
    text = command
    for secret in sorted(set(command_secrets(command)), key=len, reverse=True):
        if secret:
            text = text.replace(secret, SECRET)
    return redact_urls(text)


def _server_key(url: str) -> tuple[str, int | None] | None:
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname:
        return None
    default = {"http": 80, "https": 443}.get(parts.scheme.lower())
    return parts.hostname.lower(), port or default


def redact_urls(text: str, servers: dict[tuple[str, int | None], str] | None = None) -> str:
    """Every URL in ``text`` without user info and query values; a hidden server's URL as its
    placeholder (``servers``: (host, port) -> placeholder)."""

    def one(match: re.Match) -> str:
        url = match.group()
        if servers:
            key = _server_key(url)
            if key in servers:
                return servers[key]
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            return SECRET
        netloc = parts.netloc
        if "@" in netloc:
            host = parts.hostname or ""
            netloc = f"{SECRET}@{host}" + (f":{port}" if port else "")
        query = "&".join(
            f"{k}={SECRET}" if eq else k for k, eq, _ in (p.partition("=") for p in parts.query.split("&") if p)
        )
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))

    return _URL.sub(one, text)


@dataclass(frozen=True)
class Redactor:
    """Hides ``secrets`` (values) and ``servers`` ((URL or command, placeholder) pairs) from text
    and from records (strings inside dicts and lists, keys included)."""

    secrets: tuple[str, ...] = ()
    servers: tuple[tuple[str, str], ...] = ()
    extra: tuple[Any, ...] = field(default=(), compare=False)  # further str -> str steps, run last

    @cached_property
    def _values(self) -> tuple[tuple[str, str], ...]:
        pairs: dict[str, str] = {}
        for value in self.secrets:
            if value and len(value) >= MIN_SECRET:
                pairs[value] = SECRET
        for spec, placeholder in self.servers:
            if not spec:
                continue
            if len(spec) >= MIN_SECRET:
                pairs.setdefault(spec.strip(), placeholder)
            is_url = bool(_URL.fullmatch(spec.strip()))
            for secret in url_secrets(spec) if is_url else command_secrets(spec):
                if len(secret) >= MIN_SECRET:
                    pairs[secret] = SECRET
            if is_url:
                shown = public_url(spec)
                if len(shown) >= MIN_SECRET:
                    pairs.setdefault(shown, placeholder)
        for value, placeholder in list(pairs.items()):  # as it reads inside a URL or form
            for encoded in (quote(value, safe=""), quote_plus(value)):
                if encoded != value:
                    pairs.setdefault(encoded, placeholder)
        return tuple(sorted(pairs.items(), key=lambda pair: -len(pair[0])))  # a URL before the key inside it

    @cached_property
    def _servers(self) -> dict[tuple[str, int | None], str]:
        out = {}
        for spec, placeholder in self.servers:
            if _URL.fullmatch(spec.strip()):
                key = _server_key(spec)
                if key is not None:
                    out[key] = placeholder
        return out

    @cached_property
    def _host_ports(self) -> re.Pattern | None:
        # host:port (and the path after it) written without a scheme, as labels show a server.
        alternatives = [
            re.escape(f"{host}:{port}") for (host, port) in self._servers if port is not None
        ]
        if not alternatives:
            return None
        return re.compile(rf"(?i)(?<![\w.-])(?:{'|'.join(alternatives)})(?:/[^\s'\"<>:,;)]*)?")

    def text(self, text: str) -> str:
        text = redact_urls(text, self._servers)
        if self._host_ports is not None:
            by_key = {f"{h}:{p}": v for (h, p), v in self._servers.items()}
            text = self._host_ports.sub(lambda m: by_key.get(m.group().split("/")[0].lower(), SECRET), text)
        for value, placeholder in self._values:
            if value in text:
                text = text.replace(value, placeholder)
        text = _KEY_VALUE.sub(lambda m: f"{m.group(1)}{m.group(2)}{SECRET}", text)
        text = _TOKEN.sub(SECRET, text)
        for step in self.extra:
            text = step(text)
        return text

    def __call__(self, value: Any) -> Any:
        """``value`` with every string in it redacted (a message, or a record)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self(k) if isinstance(k, str) else k: self(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self(v) for v in value]
        return value
