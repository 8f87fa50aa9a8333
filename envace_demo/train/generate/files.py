"""Generated tasks over the ``files`` environment: reads, listings, creates,
overwrites, read-only writes, directories, deletes, moves and copies; a file found in a
folder the user names, a folder made with a file in it."""

from __future__ import annotations

from typing import Any

from envace_demo.train.generate.script import Add, Say, Script, error
from envace_demo.train.worlds import EXTRA_DIRS

READ_TOOLS = {"read_file", "list_directory"}


def _into_extra_dir(s: Script, *paths: str) -> None:
    """A move into a directory a world may lack: its rows are the rehearser's (NOT_FOUND
    or not, as the world has it); the actor is not taught to answer a missing directory
    by giving up (a user may want it created first)."""
    if any(p.rsplit("/", 1)[0] in EXTRA_DIRS or p in EXTRA_DIRS for p in paths):
        s.rehearser_only = True


def _wrote(s: Script, path: str, result: Any, done: str | None = None) -> None:
    """The answer and check of a write_file whose outcome the world decided. A missing
    directory is created, then the file written: the user asked for the file."""
    err = error(result)
    if err is not None and err["code"] == "NOT_FOUND":
        folder = path.rsplit("/", 1)[0]
        s.mistaken()
        s.call("create_directory", {"path": folder}, f"{folder} does not exist; I create it first.")
        result = s.call("write_file", dict(s.steps[-2].call.arguments), f"Now I write {path}.")
        err = error(result)
        if err is None:
            s.answer = f"{done or f'Created {path}.'} (I created the directory {folder} first.)"
            s.check_state("files", path)
            return
    if err is None:
        s.answer = done or f"Created {path}."
        s.check_state("files", path)
        return
    if err["code"] == "ALREADY_EXISTS":
        s.answer = f"{path} already exists, so I did not replace it: {err['message']}."
        s.check_answer("already exists")
    else:
        s.answer = f"I could not write {path}: {err['message']}."
    s.check_call("write_file", dict(s.steps[-1].call.arguments))
    s.check_state("files", path, exists=path in s.state("files"))


def _replaces(add: Add, say: Say) -> None:
    """Replacing a file's content, asked without the word overwrite: the plain write
    meets ALREADY_EXISTS, and the request asks for the replacement, so it is written again
    with ``overwrite`` (a world without the file takes the first write)."""
    for i, (path, content) in enumerate((("/projects/budget.csv", "month,amount\nmay,640\n"),
                                         ("/projects/website/index.html", "<h1>Closed for summer</h1>"),
                                         ("/notes/meeting-2025-03-10.md", "Meeting moved to Monday"),
                                         ("/projects/website/style.css", "h1 { color: red; }"),
                                         ("/projects/reports/q1.txt", "Q1 down 2%"))):
        s = add(f"replace-{i}", say(i, ("Edit {p} so it reads: {c}", "Make {p} contain only: {c}",
                                        "Update {p} to read: {c}", "Put this in {p} instead of what is there: {c}"),
                                    p=path, c=content))
        r = s.call("write_file", {"path": path, "content": content}, f"I write {path}.")
        err = error(r)
        if err is not None and err["code"] == "ALREADY_EXISTS":
            s.mistaken()
            r = s.call("write_file", {"path": path, "content": content, "overwrite": True},
                       f"{path} exists and the user wants it replaced: I write it with overwrite.")
        _wrote(s, path, r, f"{path} now contains: {content}")


def _reads(add: Add, say: Say) -> None:
    """Reading a file, there or not."""
    reads = (("/notes/todo.txt", "What does /notes/todo.txt say?", "milk"),
             ("/notes/meeting-2025-03-10.md", "Read /notes/meeting-2025-03-10.md for me.", "Friday"),
             ("/projects/budget.csv", "What are the numbers in /projects/budget.csv?", "1200"),
             ("/projects/website/index.html", "Show me the content of /projects/website/index.html.", "Hello"),
             ("/system/readme.txt", "What is in /system/readme.txt?", "Read-only"),
             ("/system/config.ini", "What proxy is set in /system/config.ini?", "proxy = none"),
             ("/projects/website/style.css", "Which font does /projects/website/style.css use?", "sans-serif"),
             ("/notes/missing.txt", "Open /notes/missing.txt and tell me what it says.", "no such file"))
    for i, (path, ask, needle) in enumerate(reads):
        s = add(f"read-{i}", ask)
        r = s.call("read_file", {"path": path}, f"I read {path}.")
        err = error(r)
        s.answer = f"I could not read it: {err['message']}." if err else f"{path} contains: {r['content'].strip()}"
        s.check_call("read_file", {"path": path})
        # The seeded world's needle; a varied world's own (other contents, maybe no file).
        s.check_answer(needle if needle in s.answer else "no such file" if err else r["content"].split("\n")[0])


def _listings(add: Add, say: Say) -> None:
    """Listing a directory."""
    for i, path in enumerate(("/notes", "/projects", "/system", "/archive", "/", "/projects/website")):
        s = add(f"list-{i}", say(i, ("What is in the {p} directory?", "List the files in {p}.",
                                     "Which files does {p} hold?",
                                     "What's inside {p}?", "Give me the contents of the {p} directory."), p=path))
        r = s.call("list_directory", {"path": path}, f"I list {path}.")
        names = [e["name"] for e in r["entries"]]
        s.answer = f"{path} contains: {', '.join(names)}." if names else f"{path} is empty."
        s.check_call("list_directory", {"path": path})
        s.check_answer(*(names[:2] or ["empty"]))


def _creates(add: Add, say: Say) -> None:
    """New files, without overwrite: created, already there, or no directory."""
    writes = (("/notes/ideas.txt", "paint the fence"), ("/archive/old.txt", "nothing to keep"),
              ("/projects/plan.md", "# Plan\nship v3"), ("/notes/call.txt", "call Raj at 5"),
              ("/projects/website/about.html", "<p>About Mei</p>"))
    for i, (path, content) in enumerate(writes):
        s = add(f"write-{i}", say(i, ("Create {p} with the text: {c}", "Write a new file {p} containing: {c}",
                                      "Save the text '{c}' as {p}.", "Make a file {p} with the text: {c}",
                                      "Put '{c}' into a new file {p}."), p=path, c=content))
        r = s.call("write_file", {"path": path, "content": content}, f"I write the new file {path}.")
        _wrote(s, path, r)
    # "Create" without overwrite: ALREADY_EXISTS where the file is there already (seeded: the
    # first three), created where it is not; NOT_FOUND where its directory is missing.
    for i, (path, content) in enumerate((("/notes/todo.txt", "- call mum"),
                                         ("/projects/budget.csv", "month,amount\napr,700\n"),
                                         ("/projects/website/index.html", "<h1>New home</h1>"),
                                         ("/notes/shopping.txt", "eggs, rice"),
                                         ("/projects/roadmap.md", "# Roadmap\nv4 in May"),
                                         ("/archive/notes-2024.txt", "all done"),
                                         ("/projects/reports/q1.txt", "Q1 revenue up 4%"),
                                         ("/archive/2024/summary.txt", "closed 12 tickets"),
                                         ("/notes/travel/packing.txt", "passport, charger"),
                                         ("/projects/old/v1.txt", "first draft"))):
        s = add(f"create-{i}", say(i, ("Create {p} with the text: {c}", "Write a new file {p} containing: {c}",
                                       "Save the text '{c}' as {p}."), p=path, c=content))
        r = s.call("write_file", {"path": path, "content": content}, f"I write the new file {path}.")
        _wrote(s, path, r)


def _overwrites(add: Add, say: Say) -> None:
    """Overwriting a file the user names."""
    # Overwriting a file the user names: allowed outside /system (created where it was not
    # there), refused inside it; NOT_FOUND where the directory is missing.
    for i, (path, content) in enumerate((("/notes/todo.txt", "- buy eggs"),
                                         ("/projects/website/style.css", "body { color: navy; }"),
                                         ("/notes/groceries.txt", "- rice"),
                                         ("/projects/website/contact.html", "<p>Mail us</p>"),
                                         ("/archive/todo.txt", "- nothing left"),
                                         ("/projects/reports/q1.txt", "Q1 flat"),
                                         ("/notes/drafts/todo.txt", "- draft the plan"))):
        s = add(f"overwrite-{i}", say(i, ("Set the content of {p} to: {c}",
                                          "Replace the content of {p} with: {c}",
                                          "Overwrite {p} with the text: {c}"), p=path, c=content))
        r = s.call("write_file", {"path": path, "content": content, "overwrite": True}, f"I overwrite {path}.")
        _wrote(s, path, r, f"{path} now contains: {content}")


def _readonly_writes(add: Add, say: Say) -> None:
    """Writes under /system, refused."""
    # New files under /system too: the path alone decides (the rehearser learns the rule,
    # not a list of files).
    for i, (path, content) in enumerate((("/system/readme.txt", "hello"), ("/system/hosts", "127.0.0.1 box"),
                                         ("/system/readme.txt", "maintenance at 6"), ("/system/motd", "back at 9"),
                                         ("/system/network.ini", "proxy = 192.168.0.1"),
                                         ("/system/settings.conf", "timeout = 60"))):
        s = add(f"write-readonly-{i}", say(i, ("Write '{c}' into {p}.", "Make {p} say only: {c}",
                                               "Replace everything in {p} with the line: {c}"), p=path, c=content))
        r = s.call("write_file", {"path": path, "content": content, "overwrite": True}, f"I write {path}.")
        s.answer = f"I could not write {path}: {error(r)['message']}."
        s.check_call("write_file", {"path": path, "content": content, "overwrite": True})
        s.check_state("files", path, exists=path in s.state("files"))
        s.check_answer("read-only")


def _mkdirs_and_deletes(add: Add, say: Say) -> None:
    """Creating a directory; deleting a file."""
    for i, path in enumerate(("/projects/reports", "/archive/2024", "/notes/travel")):
        s = add(f"mkdir-{i}", say(i, ("Create a directory {p}.", "Make a folder {p}.", "Add a new directory {p}.",
                                      "Set up the folder {p}."), p=path))
        r = s.call("create_directory", {"path": path}, f"I create the directory {path}.")
        err = error(r)
        s.answer = f"{path} already exists." if err else f"Created the directory {path}."
        s.check_state("directories", path)
    for i, path in enumerate(("/notes/todo.txt", "/projects/budget.csv", "/system/config.ini")):
        s = add(f"delete-{i}", say(i, ("Delete {p}.", "Remove the file {p}.", "Erase {p}, please.",
                                       "Throw away {p}."), p=path))
        r = s.call("delete_file", {"path": path}, f"I delete {path}.")
        err = error(r)
        if err and err["code"] == "PERMISSION_DENIED":
            s.answer = f"I could not delete it, {path} is read-only: {err['message']}."
            s.check_call("delete_file", {"path": path})
            s.check_answer("read-only")
        elif err:
            s.answer = f"I could not delete it: {err['message']}."
            s.check_call("delete_file", {"path": path})
        else:
            s.answer = f"Deleted {path}."
        s.check_state("files", path, exists=path in s.state("files"))


def _moves(add: Add, say: Say) -> None:
    """Moves into a directory or onto a file, there or not."""
    # Moves: into a directory that exists or not, onto a file that exists or not.
    for i, (src, dst) in enumerate((("/notes/todo.txt", "/archive"), ("/projects/budget.csv", "/archive/budget.csv"),
                                    ("/projects/website/style.css", "/projects/style.css"),
                                    ("/notes/todo.txt", "/notes/drafts/todo.txt"),
                                    ("/projects/budget.csv", "/archive/2023/budget.csv"),
                                    ("/notes/meeting-2025-03-10.md", "/archive/2024"),
                                    ("/projects/website/index.html", "/projects/old/index.html"))):
        s = add(f"move-{i}", say(i, ("Move {s} to {d}.", "Please move {s} over to {d}.", "Relocate {s} to {d}.",
                                     "Shift {s} into {d}.", "Put {s} in {d}, I'm done with it there.",
                                     "File {s} under {d}."), s=src, d=dst))
        r = s.call("move_file", {"source": src, "destination": dst}, f"I move {src} to {dst}.")
        _into_extra_dir(s, dst)
        err = error(r)
        if err:
            s.answer = f"I could not move {src}: {err['message']}."
            s.check_call("move_file", {"source": src, "destination": dst})
            s.check_state("files", src, exists=src in s.state("files"))
        else:
            s.answer = f"Moved {src} to {r['destination']}."
            s.check_state("files", r["destination"], exists=True)
            s.check_state("files", src, exists=False)


def _copies(add: Add, say: Say) -> None:
    """Copies: a read, then a write."""
    for i, (src, dst) in enumerate((("/notes/todo.txt", "/archive/todo-copy.txt"),
                                    ("/system/readme.txt", "/notes/readme-copy.txt"),
                                    ("/projects/website/index.html", "/archive/index.html"),
                                    ("/notes/meeting-2025-03-10.md", "/archive/meeting-notes.md"),
                                    ("/system/config.ini", "/notes/config-backup.ini"))):
        s = add(f"copy-{i}", say(i, ("Copy {s} to {d}, keeping the original.", "Back up {s} as {d}; keep the original.",
                                     "Duplicate {s} as {d} and leave the original where it is."), s=src, d=dst))
        r = s.call("read_file", {"path": src}, f"To copy {src} I read it first.")
        err = error(r)
        if err:
            s.answer = f"I could not copy it: {err['message']}."
            s.check_call("read_file", {"path": src})
            continue
        w = s.call("write_file", {"path": dst, "content": r["content"]}, f"Now I write its content to {dst}.")
        err = error(w)
        s.answer = f"I could not copy it: {err['message']}." if err else f"Copied {src} to {dst}."
        s.check_state("files", dst)
        s.check_state("files", src, exists=True)


def _found_in_folder(add: Add, say: Say) -> None:
    """A file the user describes and places in a folder without naming it: the folder is
    listed first, then the file read (or the answer says the folder has none)."""
    asks = (
        ("/projects", "budget.csv", "budget",
         "What did March come to in my budget? The spreadsheet is somewhere in /projects."),
        ("/projects/website", "style.css", "stylesheet",
         "Which font does my site's stylesheet use? It's somewhere in /projects/website."),
        ("/system", "readme.txt", "readme", "There's a readme somewhere in /system. What does it say?"),
        ("/notes", "books-to-read.txt", "reading list", "I keep a reading list in /notes. What's on it?"),
        ("/notes", "recipes.txt", "recipes", "read me my recipes file, it's in /notes"),
        ("/projects", "ideas.md", "ideas", "My project ideas are in a file under /projects. What are they?"),
        ("/archive", "letters.txt", "letters",
         "Somewhere in /archive there's a file of my letters. What does it say?"),
        ("/notes", "shopping.txt", "shopping list", "Is there a shopping list in /notes? What's on it?"),
    )
    for i, (folder, name, what, ask) in enumerate(asks):
        s = add(f"found-in-{folder.strip('/').replace('/', '-')}-{i}", ask)
        r = s.call("list_directory", {"path": folder},
                   f"The user did not name the file; I list {folder} to find the {what}.")
        names = [e["name"] for e in r["entries"] if e["type"] == "file"]
        s.check_call("list_directory", {"path": folder})
        if name not in names:
            s.answer = f"I found no {what} in {folder}; it holds: {', '.join(names) or 'no files'}."
            s.check_answer(f"no {what}")
            continue
        path = f"{folder}/{name}"
        r = s.call("read_file", {"path": path}, f"The {what} is {path}; I read it.")
        s.answer = f"{path} contains: {r['content'].strip()}"
        s.check_call("read_file", {"path": path})
        s.check_answer(r["content"].strip().split("\n")[-1])


def _folder_then_file(add: Add, say: Say) -> None:
    """A new folder and a file in it, asked for at once: the folder first (there already
    or not), then the file."""
    for i, (folder, name, content) in enumerate((("/projects/reports", "q2.txt", "Q2 revenue up 3%"),
                                                 ("/archive/2024", "taxes.txt", "filed on April 2"),
                                                 ("/notes/travel", "rome.txt", "Colosseum, Trastevere, gelato"),
                                                 ("/notes/drafts", "letter.txt", "Dear Lars, thanks for the invoice."),
                                                 ("/projects/old", "notes.md", "keep for reference"),
                                                 ("/archive/2023", "receipts.txt", "printer ink 24.99"))):
        s = add(f"folder-and-file-{i}", say(i, ("Create a folder {d} and inside it a file {n} containing: {c}",
                                                "Make a new directory {d}, then save '{c}' in it as {n}.",
                                                "Set up {d} with a file called {n} that says exactly: {c}"),
                                            d=folder, n=name, c=content))
        r = s.call("create_directory", {"path": folder}, f"First the folder {folder}.")
        made = error(r) is None
        path = f"{folder}/{name}"
        r = s.call("write_file", {"path": path, "content": content},
                   f"{folder} {'is made' if made else 'is there already'}; now I write {path}.")
        _wrote(s, path, r, f"Created {folder} and wrote {path}." if made
               else f"{folder} was there already; wrote {path}.")


def write(add: Add, say: Say) -> None:
    """Every files family, in order."""
    _reads(add, say)
    _listings(add, say)
    _creates(add, say)
    _overwrites(add, say)
    _replaces(add, say)
    _readonly_writes(add, say)
    _mkdirs_and_deletes(add, say)
    _moves(add, say)
    _copies(add, say)
    _found_in_folder(add, say)
    _folder_then_file(add, say)
