"""An in-memory file system: a handful of notes and project files, nothing on disk.

The state is two flat maps, ``files`` (absolute path -> text) and a set of
directories, which keeps every operation a dict lookup; ``state()`` renders the
directories with their sorted entries so checks can address either by path.
Everything under ``/system`` is read-only. Paths are normalized like a shell
would (``.``, ``..``, repeated slashes); a ``..`` that climbs above ``/`` is an
error, never a way out.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any, Sequence

from envace_demo.envs._common import Failure, Handler, ToolEnvironment
from envace_demo.record import error_code

READ_ONLY = ("/system",)
MAX_ENTRIES = 50  # list_directory's response bound (tools.json maxItems)
MAX_NAME = 255
MAX_PATH = 300  # the tools.json maxLength of a path, in requests and responses
_PATH = re.compile(r"(?<![\w.])/[\w.-]+(?:/[\w.-]+)*")  # a path written in the user's words
_FOLDER_WORD = re.compile(r"\b([a-z][\w.-]*)\s+(?:folder|directory)\b", re.IGNORECASE)  # "my notes folder"


def _seed() -> dict[str, Any]:
    files = {
        "/notes/todo.txt": (
            "- buy milk\n- call the plumber about the kitchen sink\n- renew passport before June\n"
        ),
        "/notes/meeting-2025-03-10.md": (
            "# Team sync, 2025-03-10\n"
            "Attendees: Ana, Raj, Mei\n"
            "- Ship v2.1 on Friday\n"
            "- Raj writes the release notes\n"
            "- Next sync: 2025-03-17\n"
        ),
        "/projects/budget.csv": "month,amount\njan,1200\nfeb,980\nmar,1105\n",
        "/projects/website/index.html": "<!doctype html>\n<h1>Hello from Mei's site</h1>\n",
        "/projects/website/style.css": "body { font-family: sans-serif; margin: 2rem; }\n",
        "/system/config.ini": "[network]\nproxy = none\ntimeout = 30\n",
        "/system/readme.txt": "System files. Read-only.\n",
    }
    dirs = {"/", "/notes", "/projects", "/projects/website", "/archive", "/system"}
    return {"files": files, "dirs": dirs}


def _normalize(raw: str) -> str:
    """An absolute, normalized path; relative paths are taken from ``/``."""
    if not raw.strip():
        raise Failure("INVALID_PATH", "path is empty")
    if "\x00" in raw:
        raise Failure("INVALID_PATH", "path contains a NUL character")
    parts: list[str] = []
    for part in raw.strip().split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise Failure("PATH_ESCAPES_ROOT", f"{raw!r} climbs above the root directory")
            parts.pop()
            continue
        if len(part) > MAX_NAME:
            raise Failure("INVALID_PATH", f"a name in {raw[:40]!r}... is longer than {MAX_NAME} characters")
        parts.append(part)
    return "/" + "/".join(parts)


def _safe(raw: str) -> str | None:
    """``_normalize``'s path, or None where the path is not one."""
    try:
        return _normalize(raw)
    except Failure:
        return None


def _size(text: str) -> int:
    """Size in UTF-8 bytes; a lone surrogate (valid in JSON text) must not crash it."""
    return len(text.encode("utf-8", "surrogatepass"))


_FILE_NAME = re.compile(r"(?<![\w/.-])[\w-]+\.[A-Za-z0-9]{1,5}\b")
# What a file's kind is called, and the extensions it goes by.
_KINDS = {"stylesheet": (".css",), "spreadsheet": (".csv",), "csv": (".csv",), "page": (".html",),
          "html": (".html",), "config": (".ini", ".cfg", ".conf"), "configuration": (".ini", ".cfg", ".conf"),
          "settings": (".ini", ".cfg", ".conf"), "markdown": (".md",), "list": (".txt",), "readme": (".txt", ".md")}
_MONTHS = "jan feb mar apr may jun jul aug sep oct nov dec".split()
_DAY = re.compile(r"\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+(\d{1,2})(?:st|nd|rd|th)?\b", re.I)
_SLASH_DAY = re.compile(r"\b(\d{1,2})/(\d{1,2})\b")


def _file_names(text: str) -> set[str]:
    """The file names ``text`` writes, bare or as a path's last part, lowercased."""
    return {m.group(0).lower() for m in _FILE_NAME.finditer(text)} | {
        posixpath.basename(p).lower() for p in _PATH.findall(text) if "." in posixpath.basename(p)}


def _likeness(path: str, text: str) -> int:
    """How much of ``text`` the file at ``path`` answers to: words of its name the text says
    (four letters or more), its kind by name, and its date (month and day)."""
    name = posixpath.basename(path).lower()
    words = set(re.findall(r"[a-z]{4,}", text.lower()))
    score = sum(1 for part in re.findall(r"[a-z]{4,}", name) if part in words or part + "s" in words)
    score += sum(1 for w, exts in _KINDS.items() if w in words and name.endswith(exts))
    days = [f"{_MONTHS.index(m.group(1).lower()[:3]) + 1:02d}-{int(m.group(2)):02d}" for m in _DAY.finditer(text)]
    days += [f"{int(a):02d}-{int(b):02d}" for a, b in _SLASH_DAY.findall(text)]
    return score + 2 * sum(1 for d in days if d in name)


def _written(text: str) -> set[str]:
    """The paths ``text`` writes, normalized."""
    return {p for raw in _PATH.findall(text) if (p := _safe(raw.rstrip(".")))}


def _file_meant(files: dict[str, str], text: str) -> str | None:
    """The file of ``files`` that the user's words ``text`` give: the one they write by path
    or by name; else the one whose name holds the most of their words, its kind
    ("stylesheet": .css) and date ("March 10": 03-10) counted. None where none, or no single one."""
    written = [p for p in _written(text) if p in files]
    named = [f for f in files if posixpath.basename(f).lower() in _file_names(text)]
    for found in (written, named):
        if len(set(found)) == 1:
            return found[0]
    scores = {f: _likeness(f, text) for f in files}
    best = max(scores.values(), default=0)
    chosen = [f for f, n in scores.items() if n == best]
    return chosen[0] if best > 0 and len(chosen) == 1 else None


def _target_meant(path: str, text: str, dirs: set[str], called: set[str], source: str | None) -> str | None:
    """Where a write to ``path`` goes: as given where the user's words ``text`` write it, else
    in the folder they name (written, or ``called`` by name: "my notes folder"; the path's own,
    where it is one of them; the source's, where they name only that), under the name they give
    it (else the source's, or the path's)."""
    given = _safe(path)
    written = _written(text)
    if given is not None and given in written:
        return given
    folders = {p for p in written if p in dirs} | {posixpath.dirname(p) for p in written
                                                   if posixpath.dirname(p) in dirs and p not in dirs}
    folders = {f for f in folders | called if f != "/" and not _read_only(f)}
    here = posixpath.dirname(given) if given else None
    others = folders - {posixpath.dirname(source)} if source else folders
    if here in folders and (here != (posixpath.dirname(source) if source else None) or not others):
        folder = here
    elif len(others) == 1:
        folder = next(iter(others))
    elif source and folders == {posixpath.dirname(source)}:
        folder = posixpath.dirname(source)
    else:
        return None
    names = [n for n in _file_names(text) if not source or n != posixpath.basename(source).lower()]
    own = posixpath.basename(given) if given else ""
    name = own if own.lower() in names else names[0] if len(names) == 1 else (
        posixpath.basename(source) if source else own)
    return _safe(posixpath.join(folder, name)) if name else None


def _read_only(path: str) -> bool:
    return any(path == root or path.startswith(root + "/") for root in READ_ONLY)


class FilesEnvironment(ToolEnvironment):
    name = "files"
    description = "A small in-memory file system with notes and projects; /system is read-only."

    def initial_state(self) -> dict[str, Any]:
        return _seed()

    def handlers(self) -> dict[str, Handler]:
        return {
            "list_directory": self.list_directory,
            "read_file": self.read_file,
            "write_file": self.write_file,
            "create_directory": self.create_directory,
            "move_file": self.move_file,
            "delete_file": self.delete_file,
        }

    def state(self) -> dict[str, Any]:
        return {
            "files": dict(sorted(self._files.items())),
            "directories": {d: self._entries(d) for d in sorted(self._dirs)},
            "read_only": list(READ_ONLY),
        }

    # -- helpers ---------------------------------------------------------------

    @property
    def _files(self) -> dict[str, str]:
        return self._state["files"]

    @property
    def _dirs(self) -> set[str]:
        return self._state["dirs"]

    def _entries(self, directory: str) -> list[str]:
        return sorted(
            posixpath.basename(p)
            for p in (*self._files, *self._dirs)
            if p != "/" and posixpath.dirname(p) == directory
        )

    def _existing_file(self, path: str) -> None:
        if path in self._dirs:
            raise Failure("IS_A_DIRECTORY", f"{path} is a directory")
        if path not in self._files:
            raise Failure("NOT_FOUND", f"no such file: {path}")

    def _writable(self, path: str) -> None:
        if _read_only(path):
            raise Failure("PERMISSION_DENIED", f"{path} is on a read-only path")

    def _parent_exists(self, path: str) -> None:
        parent = posixpath.dirname(path)
        if parent in self._files:
            raise Failure("NOT_A_DIRECTORY", f"{parent} is a file, not a directory")
        if parent not in self._dirs:
            raise Failure("NOT_FOUND", f"no such directory: {parent}")

    def context_reads(self, name: str, arguments: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        # A write depends on its directory: whether it exists, and what is in it already.
        keys = {"move_file": ("source", "destination")}.get(name, ("path",))
        if not self.writes(name):
            return []
        parents = []
        for key in keys:
            try:
                parents.append(posixpath.dirname(_normalize(arguments[key])))
            except (KeyError, TypeError, AttributeError, Failure):
                continue
        return [("list_directory", {"path": p}) for p in dict.fromkeys(parents)]

    def read_instead(self, name: str, arguments: dict[str, Any], result: Any,
                     said: Sequence[str] = ()) -> tuple[str, dict[str, Any]] | None:
        path = arguments.get("path")
        if not isinstance(path, str):
            return None
        # The path is right, the read is not: a folder is listed, a file is read.
        other = {("read_file", "IS_A_DIRECTORY"): "list_directory", ("list_directory", "NOT_A_DIRECTORY"): "read_file"}
        if (instead := other.get((name, error_code(result)))) is not None:
            return instead, {"path": path}
        if (name, error_code(result)) == ("list_directory", "NOT_FOUND"):
            # A folder that is not there: the one the user's words name, or its deepest folder that is.
            folder = self.folder_of(path, said, listing=True)
            return ("list_directory", {"path": folder}) if folder else None
        if (name, error_code(result)) != ("read_file", "NOT_FOUND"):
            return None
        # A file that is there under a shorter path: "/system/projects/website/style.css" was made
        # up from "/projects/website/style.css", which is read.
        if (there := self.file_within(path)) is not None:
            return "read_file", {"path": there}
        # Else the one file the user's words name, by name, kind or date ("the team sync on March
        # 10th" is meeting-2025-03-10.md); else the folder it may be in is listed (``folder_of``).
        # A path the user wrote stands: "save mine as /notes/todo-2.txt" is not the todo list.
        text = " ".join(said)
        if _safe(path) not in _written(text) and (meant := _file_meant(self._files, text)) is not None:
            return "read_file", {"path": meant}
        if folder := self.folder_of(path, said):
            return "list_directory", {"path": folder}
        return None

    def file_within(self, path: str) -> str | None:
        """The longest tail of ``path`` that names a file which is there ("/projects/x.css" of
        "/system/projects/x.css"), or None."""
        parts = (_safe(path) or "/").strip("/").split("/")
        tails = ("/" + "/".join(parts[i:]) for i in range(1, len(parts)))
        return next((t for t in tails if t in self._files), None)

    def folder_of(self, path: str, said: Sequence[str], listing: bool = False) -> str | None:
        """Where a file looked for at ``path``, which is not there, may be: a folder of its path
        that the user's words name (a folder written in them, or one holding a file written in
        them), else the one folder they name ("in /notes", "in my notes folder"), else the deepest
        folder of ``path`` that exists; None where that is the root, which says nothing of where
        to look; a named folder inside the one found is nearer. A folder ``listing`` that is not there
        is looked for the same way, from itself."""
        written = _written(" ".join(said))
        named = {p if p in self._dirs else posixpath.dirname(p) for p in written} & self._dirs - {"/"}
        named |= self.folders_called({w.lower() for text in said for w in _FOLDER_WORD.findall(text)})
        folders, folder = [], (_safe(path) or "/") if listing else posixpath.dirname(_safe(path) or "/")
        while True:  # the folders of the path that exist, the deepest first
            if folder in self._dirs:
                folders.append(folder)
            if folder == "/":
                break
            folder = posixpath.dirname(folder)
        chosen = next((f for f in folders if f in named), None) or (min(named) if len(named) == 1 else folders[0])
        # A named folder inside the chosen one is the nearer answer: "the website folder under /projects".
        inside = [n for n in named if n.startswith(chosen.rstrip("/") + "/")]
        chosen = inside[0] if len(inside) == 1 else chosen
        return chosen if chosen != "/" else None

    def folders_called(self, words: set[str]) -> set[str]:
        """The folders whose own name is one of ``words``, or its plural or singular ("note")."""
        forms = words | {w + "s" for w in words} | {w.removesuffix("s") for w in words}
        return {d for d in self._dirs if d != "/" and posixpath.basename(d).lower() in forms}

    def write_instead(self, name: str, arguments: dict[str, Any], said: Sequence[str] = ()) -> dict[str, Any] | None:
        # A path the actor made up, where the user's words name a file that is there (by its
        # name, its kind, its date) or the folder it goes to: "move the stylesheet into /archive".
        keys = {"move_file": ("source", "destination"), "write_file": ("path",), "delete_file": ("path",)}.get(name)
        if keys is None or not all(isinstance(arguments.get(k), str) for k in keys):
            return None
        new = dict(arguments)
        source = None
        if name in ("move_file", "delete_file"):
            key = keys[0]
            given = _safe(arguments[key])
            source = given if given in self._files else self.file_meant(arguments[key], said)
            if source is None:
                return None
            new[key] = source
        if name in ("move_file", "write_file"):
            key = keys[-1]
            if (target := self.target_meant(arguments[key], said, source)) is None:
                return None
            new[key] = target
        return new if new != arguments else None

    def file_meant(self, path: str, said: Sequence[str]) -> str | None:
        """The file that is there which a path not there stands for (``_file_meant``)."""
        return self.file_within(path) or _file_meant(self._files, " ".join(said))

    def target_meant(self, path: str, said: Sequence[str], source: str | None = None) -> str | None:
        """Where a write to ``path`` goes (``_target_meant``)."""
        text = " ".join(said)
        called = self.folders_called({w.lower() for w in _FOLDER_WORD.findall(text)})
        return _target_meant(path, text, self._dirs, called, source)

    def read_options(self, name: str, instead: str, result: Any) -> list[dict[str, Any]]:
        if name != "read_file" or instead != "list_directory" or not isinstance(result, dict):
            return []
        folder, entries = result.get("path"), result.get("entries")
        if not isinstance(folder, str) or not isinstance(entries, list):
            return []
        return [{"path": posixpath.join(folder, e["name"])} for e in entries
                if isinstance(e, dict) and e.get("type") == "file" and isinstance(e.get("name"), str)]

    # -- tools -----------------------------------------------------------------

    def list_directory(self, args: dict[str, Any]) -> dict[str, Any]:
        path = _normalize(args["path"])
        if path in self._files:
            raise Failure("NOT_A_DIRECTORY", f"{path} is a file, not a directory")
        if path not in self._dirs:
            raise Failure("NOT_FOUND", f"no such directory: {path}")
        names = self._entries(path)
        entries = []
        for name in names[:MAX_ENTRIES]:
            full = posixpath.join(path, name)
            if full in self._dirs:
                entries.append({"name": name, "type": "directory", "size": 0})
            else:
                entries.append({"name": name, "type": "file", "size": _size(self._files[full])})
        return {"path": path, "entries": entries, "truncated": len(names) > MAX_ENTRIES}

    def read_file(self, args: dict[str, Any]) -> dict[str, Any]:
        path = _normalize(args["path"])
        self._existing_file(path)
        content = self._files[path]
        return {"path": path, "content": content, "size": _size(content)}

    def write_file(self, args: dict[str, Any]) -> dict[str, Any]:
        path = _normalize(args["path"])
        if path in self._dirs:
            raise Failure("IS_A_DIRECTORY", f"{path} is a directory")
        self._writable(path)
        self._parent_exists(path)
        existed = path in self._files
        if existed and not args.get("overwrite", False):
            raise Failure("ALREADY_EXISTS", f"{path} already exists; pass overwrite=true to replace it")
        self._files[path] = args["content"]
        return {"path": path, "size": _size(args["content"]), "created": not existed}

    def create_directory(self, args: dict[str, Any]) -> dict[str, Any]:
        path = _normalize(args["path"])
        if path in self._dirs or path in self._files:
            raise Failure("ALREADY_EXISTS", f"{path} already exists")
        self._writable(path)
        self._parent_exists(path)
        self._dirs.add(path)
        return {"path": path, "created": True}

    def move_file(self, args: dict[str, Any]) -> dict[str, Any]:
        source = _normalize(args["source"])
        destination = _normalize(args["destination"])
        self._existing_file(source)
        # Like mv: moving onto an existing directory puts the file inside it.
        if destination in self._dirs:
            destination = posixpath.join(destination, posixpath.basename(source))
            if len(destination) > MAX_PATH:
                raise Failure("INVALID_PATH", f"the destination path is longer than {MAX_PATH} characters")
        self._writable(source)
        self._writable(destination)
        if destination == source:
            raise Failure("INVALID_PATH", "source and destination are the same file")
        if destination in self._files or destination in self._dirs:
            raise Failure("ALREADY_EXISTS", f"{destination} already exists")
        self._parent_exists(destination)
        self._files[destination] = self._files.pop(source)
        return {"source": source, "destination": destination}

    def delete_file(self, args: dict[str, Any]) -> dict[str, Any]:
        path = _normalize(args["path"])
        self._existing_file(path)
        self._writable(path)
        del self._files[path]
        return {"path": path, "deleted": True}
