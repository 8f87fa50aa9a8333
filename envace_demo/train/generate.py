"""Generated training tasks over the example environments' own entities, each with a
scripted solution run against the real environment.

For ``bank``, ``files`` and ``library`` the functions below write requests about the
environment's accounts and amounts, paths and contents, books and patrons. Each task is
solved by a short script of real calls (one per actor turn, as the embedded model acts)
and an answer written from the real results; its check (the task format of
``envace_demo.tasks``) is read from the final state and the results, and holds for the
script by construction (``tests/test_train_generate.py`` runs every one). The example
tasks marked ``"split": "heldout"`` stay apart: no generated task repeats a held-out
task's request or the calls its check asks for (``overlaps_heldout``).

``ScriptedTask`` keeps what the warm start needs: the task, and per turn the thought,
the call, the context the rehearser is given for it (the real reads its environment names
for it, ``Environment.context_reads``, made just before the call as the engine makes
them) and its real response, then the final thought and answer.

The requests of every family stay the same in every world (``worlds.py``); what a world
decides, the script reads from the real responses: a withdrawal over the balance, money
moving on a frozen account, a file that exists already or a directory that does not.
A family that makes a mistake on purpose marks it (``ScriptedTask.rehearser_only``):
its rows are then the rehearser's alone, so the actor never learns the mistake.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from envace_demo.context import read_context
from envace_demo.envs.registry import create
from envace_demo.record import ToolCall
from envace_demo.tasks import Task, env_tasks, task_from_record
from envace_demo.train.worlds import EXTRA_DIRS

GENERATED_ENVS = ("bank", "files", "library")


@dataclass
class ScriptedStep:
    thought: str
    call: ToolCall
    result: Any
    # The (read, real result) pairs the engine puts last in the rehearser's few-shot for
    # this call, read in the same world just before it (empty for a call with no reads).
    context: list[tuple[ToolCall, Any]] = field(default_factory=list)


@dataclass
class ScriptedTask:
    task: Task
    steps: list[ScriptedStep]
    answer: str
    answer_thought: str
    reads_only: bool  # the request asks for no change of state
    rehearser_only: bool = False  # a script with a deliberate mistake: no actor rows

    @property
    def calls(self) -> list[ToolCall]:
        return [s.call for s in self.steps]


@dataclass
class _Script:
    """One task being written: calls run against ``env`` as they are added."""

    env_name: str
    env: Any
    name: str
    prompt: str
    steps: list[ScriptedStep] = field(default_factory=list)
    answer: str = ""
    answer_thought: str = "I have what the user asked for."
    check: dict = field(default_factory=dict)
    rehearser_only: bool = False

    def call(self, tool: str, arguments: dict, thought: str) -> Any:
        context = read_context(self.env.context_reads(tool, arguments), self.env.execute)
        result = self.env.execute(tool, arguments)
        self.steps.append(ScriptedStep(thought, ToolCall(tool, arguments), result, context))
        return result

    def state(self, *path: str) -> Any:
        node = self.env.state()
        for key in path:
            node = node[key]
        return node

    def check_state(self, *path: str, exists: bool | None = None) -> None:
        cond: dict[str, Any] = {"path": list(path)}
        if exists is None:
            cond["equals"] = self.state(*path)
        else:
            cond["exists"] = exists
        self.check.setdefault("state", []).append(cond)

    def check_call(self, tool: str, arguments: dict) -> None:
        """The committed calls must include this one (each argument's one accepted value)."""
        self.check.setdefault("includes_calls", []).append({tool: {k: [v] for k, v in arguments.items()}})

    def check_answer(self, *needles: str) -> None:
        self.check.setdefault("answer_contains", []).extend(needles)


def _error(result: Any) -> dict | None:
    err = result.get("error") if isinstance(result, dict) else None
    return err if isinstance(err, dict) else None


def _money(x: float) -> str:
    return f"{x:.2f}"


# ---- bank ---------------------------------------------------------------------------

_ACCOUNTS = ("ACC-1001", "ACC-1002", "ACC-1003", "ACC-1004", "ACC-1005")


def _bank(add: Callable[[str, str], _Script], say: Callable[..., str]) -> None:
    balance_asks = (
        "What is the balance of account {a}?",
        "How much money is in account {a} right now?",
        "Check the balance on my account {a}, please.",
    )
    for i, a in enumerate(_ACCOUNTS):
        for j, ask in enumerate(balance_asks[: 2 if i % 2 else 3]):
            s = add(f"balance-{a[-4:]}-{j}", ask.format(a=a))
            r = s.call("get_account", {"account_id": a}, f"The user wants the balance of {a}; I look the account up.")
            s.answer = f"Account {a} ({r['owner']}, {r['type']}) has a balance of {_money(r['balance'])} USD."
            s.check_call("get_account", {"account_id": a})
            s.check_answer(_money(r["balance"]))
    for a in ("ACC-1003", "ACC-1004", "ACC-1005"):
        s = add(f"status-{a[-4:]}", f"Is account {a} active or frozen?")
        r = s.call("get_account", {"account_id": a}, f"I look up account {a} to see its status.")
        s.answer = f"Account {a} is {r['status']}."
        s.check_call("get_account", {"account_id": a})
        s.check_answer(r["status"])
    for a, n in (("ACC-1001", 1), ("ACC-1001", 2), ("ACC-1001", 5), ("ACC-1003", 2), ("ACC-1003", 1),
                 ("ACC-1002", 3), ("ACC-1002", 1), ("ACC-1005", 3)):
        s = add(f"history-{a[-4:]}-{n}", say(n + len(a), (
            "Show the last {n} transaction{s} of account {a}.",
            "What were the {n} most recent transaction{s} on {a}?",
            "List the latest {n} transaction{s} for account {a}, please.",
        ), n=n, a=a, s="s" if n > 1 else ""))
        r = s.call("list_transactions", {"account_id": a, "limit": n},
                   f"The user wants the {n} most recent transactions of {a}.")
        txs = r["transactions"]
        if txs:
            listed = "; ".join(f"{t['date']} {t['description']} {_money(t['amount'])} USD" for t in txs)
            s.answer = f"The last transactions of {a}: {listed}."
            s.check_answer(txs[0]["description"])
        else:
            s.answer = f"Account {a} has no transactions on record."
            s.check_answer("no transactions")
        s.check_call("list_transactions", {"account_id": a, "limit": n})
    for a, amount in (("ACC-1001", 250.0), ("ACC-1002", 40.0), ("ACC-1005", 100.0), ("ACC-1001", 75.5),
                      ("ACC-1004", 60.0), ("ACC-1005", 12.25), ("ACC-1004", 1000.0), ("ACC-1003", 35.0)):
        s = add(f"deposit-{a[-4:]}-{amount:g}", say(int(amount), (
            "Deposit ${x:g} into account {a}.", "Please put ${x:g} into my account {a}.", "Add ${x:g} to account {a}.",
        ), x=amount, a=a))
        r = s.call("deposit", {"account_id": a, "amount": amount}, f"I deposit {amount:g} USD into {a}.")
        err = _error(r)
        if err:
            s.answer = f"The deposit failed: account {a} is frozen, so no money can move in or out."
            s.check_answer("frozen")
        else:
            s.answer = f"Deposited {_money(amount)} USD into {a}; the new balance is {_money(r['new_balance'])} USD."
        s.check_state("accounts", a, "balance")
    # Withdrawals: over the balance or not, on a frozen account or not, as the world has it
    # (the seeded world: ACC-1005 holds 15.50, ACC-1003 310.25, ACC-1004 is frozen).
    for a, amount in (("ACC-1001", 100.0), ("ACC-1002", 500.0), ("ACC-1003", 50.0), ("ACC-1003", 900.0),
                      ("ACC-1005", 20.0), ("ACC-1004", 30.0), ("ACC-1003", 450.0), ("ACC-1001", 1300.0),
                      ("ACC-1005", 15.0), ("ACC-1002", 75.0), ("ACC-1004", 500.0), ("ACC-1005", 60.0),
                      ("ACC-1001", 20.0), ("ACC-1003", 310.0)):
        s = add(f"withdraw-{a[-4:]}-{amount:g}", say(int(amount), (
            "Withdraw ${x:g} from account {a}.", "Take ${x:g} out of {a}.", "I need to withdraw ${x:g} from my account {a}.",
        ), x=amount, a=a))
        r = s.call("withdraw", {"account_id": a, "amount": amount}, f"I withdraw {amount:g} USD from {a}.")
        err = _error(r)
        if err and err["code"] == "INSUFFICIENT_FUNDS":
            s.answer = f"I could not withdraw it: {err['message']} (insufficient funds)."
            s.check_answer("insufficient")
        elif err:
            s.answer = f"I could not withdraw it: {err['message']}."
            s.check_answer("frozen")
        else:
            s.answer = f"Withdrew {_money(amount)} USD from {a}; the new balance is {_money(r['new_balance'])} USD."
        s.check_state("accounts", a, "balance")
        s.check_call("withdraw", {"account_id": a, "amount": amount})
    # Transfers: over the balance, from or to a frozen account, over the daily limit, or through.
    for src, dst, amount in (("ACC-1001", "ACC-1003", 100.0), ("ACC-1002", "ACC-1005", 300.0),
                             ("ACC-1003", "ACC-1001", 60.0), ("ACC-1001", "ACC-1004", 50.0),
                             ("ACC-1005", "ACC-1002", 200.0), ("ACC-1005", "ACC-1001", 50.0),
                             ("ACC-1003", "ACC-1002", 400.0), ("ACC-1001", "ACC-1005", 1500.0),
                             ("ACC-1004", "ACC-1003", 100.0), ("ACC-1002", "ACC-1004", 250.0),
                             ("ACC-1003", "ACC-1005", 25.0), ("ACC-1002", "ACC-1001", 700.0)):
        s = add(f"transfer-{src[-4:]}-{dst[-4:]}-{amount:g}", say(int(amount), (
            "Transfer ${x:g} from {src} to {dst}.", "Move ${x:g} from my account {src} to {dst}.",
            "Send ${x:g} from {src} to account {dst}.",
        ), x=amount, src=src, dst=dst))
        r = s.call("transfer", {"from_account_id": src, "to_account_id": dst, "amount": amount},
                   f"I move {amount:g} USD from {src} to {dst}.")
        err = _error(r)
        if err:
            word = {"INSUFFICIENT_FUNDS": "insufficient", "ACCOUNT_FROZEN": "frozen"}.get(err["code"], "limit")
            s.answer = f"The transfer did not go through ({word}): {err['message']}."
            s.check_answer(word)
        else:
            s.answer = (f"Transferred {_money(amount)} USD from {src} to {dst}. {src} now has "
                        f"{_money(r['from_balance'])} USD and {dst} has {_money(r['to_balance'])} USD.")
        s.check_state("accounts", src, "balance")
        s.check_state("accounts", dst, "balance")
    # Over the daily limit, then the most allowed (ACC-1002 is the one account whose limit
    # binds before its balance does).
    for dst, amount in (("ACC-1003", 1200.0), ("ACC-1005", 2500.0), ("ACC-1003", 3000.0), ("ACC-1005", 1800.0)):
        s = add(f"transfer-limit-1002-{dst[-4:]}-{amount:g}", say(int(amount) // 100, (
            ("Send ${x:g} from savings ACC-1002 to {dst}. If that is over the daily limit, send the most the bank "
             "allows today instead."),
            ("Move ${x:g} from my savings account ACC-1002 to {dst}; if the daily limit does not allow it, move as "
             "much as it allows today."),
            ("Please transfer ${x:g} from ACC-1002 to {dst}. Should that exceed my daily limit, transfer the maximum "
             "allowed today instead."),
        ), x=amount, dst=dst))
        r = s.call("transfer", {"from_account_id": "ACC-1002", "to_account_id": dst, "amount": amount},
                   f"I try the full {amount:g} USD first.")
        err = _error(r)
        source = s.state("accounts", "ACC-1002")
        allowed = round(source["daily_transfer_limit"] - source["transferred_today"], 2)
        if err and err["code"] == "DAILY_LIMIT_EXCEEDED" and allowed > 0:
            r = s.call("transfer", {"from_account_id": "ACC-1002", "to_account_id": dst, "amount": allowed},
                       f"Over the daily limit; {allowed:g} USD is what can still move today.")
            err = _error(r)
        if err:
            s.answer = f"The transfer did not go through: {err['message']}."
        elif r["amount"] == amount:
            s.answer = (f"Transferred the full {_money(amount)} USD from ACC-1002 to {dst}; ACC-1002 now has "
                        f"{_money(r['from_balance'])} USD.")
        else:
            s.answer = (f"The full amount was over the daily limit, so I transferred {_money(allowed)} USD; "
                        f"ACC-1002 now has {_money(r['from_balance'])} USD.")
        s.check_state("accounts", "ACC-1002", "balance")
        s.check_state("accounts", dst, "balance")
    for a, reason, ask in (("ACC-1001", "stolen_card", "My card was stolen, freeze account {a} now."),
                           ("ACC-1002", "customer_request", "Please freeze my account {a}, I am travelling."),
                           ("ACC-1005", "lost_card", "I lost my card; freeze account {a}."),
                           ("ACC-1004", "lost_card", "I lost my card, freeze {a} please.")):
        s = add(f"freeze-{a[-4:]}", ask.format(a=a))
        r = s.call("freeze_account", {"account_id": a, "reason": reason}, f"I freeze {a} with reason {reason}.")
        err = _error(r)
        s.answer = f"Account {a} was already frozen." if err else f"Account {a} is now frozen ({reason})."
        s.check_state("accounts", a, "status")
        s.check_answer("frozen")


# ---- files --------------------------------------------------------------------------


def _into_extra_dir(s: _Script, *paths: str) -> None:
    """A request that writes into a directory a world may lack: its rows are the
    rehearser's (NOT_FOUND or not, as the world has it); the actor is not taught to answer
    a missing directory by giving up (a user may want it created first)."""
    if any(p.rsplit("/", 1)[0] in EXTRA_DIRS or p in EXTRA_DIRS for p in paths):
        s.rehearser_only = True


def _wrote(s: _Script, path: str, result: Any, done: str | None = None) -> None:
    """The answer and check of a write_file whose outcome the world decided."""
    _into_extra_dir(s, path)
    err = _error(result)
    if err is None:
        s.answer = done or f"Created {path}."
        s.check_state("files", path)
        return
    if err["code"] == "ALREADY_EXISTS":
        s.answer = f"{path} already exists, so I did not replace it: {err['message']}."
        s.check_answer("already exists")
    elif err["code"] == "NOT_FOUND":
        s.answer = f"I could not write {path}: {err['message']} (the directory does not exist)."
        s.check_answer("does not exist")
    else:
        s.answer = f"I could not write {path}: {err['message']}."
    s.check_call("write_file", dict(s.steps[-1].call.arguments))
    s.check_state("files", path, exists=path in s.state("files"))


def _files(add: Callable[[str, str], _Script], say: Callable[..., str]) -> None:
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
        err = _error(r)
        s.answer = f"I could not read it: {err['message']}." if err else f"{path} contains: {r['content'].strip()}"
        s.check_call("read_file", {"path": path})
        # The seeded world's needle; a varied world's own (other contents, maybe no file).
        s.check_answer(needle if needle in s.answer else "no such file" if err else r["content"].split("\n")[0])
    for i, path in enumerate(("/notes", "/projects", "/system", "/archive", "/", "/projects/website")):
        s = add(f"list-{i}", say(i, ("What is in the {p} directory?", "List the files in {p}.",
                                     "Which files does {p} hold?"), p=path))
        r = s.call("list_directory", {"path": path}, f"I list {path}.")
        names = [e["name"] for e in r["entries"]]
        s.answer = f"{path} contains: {', '.join(names)}." if names else f"{path} is empty."
        s.check_call("list_directory", {"path": path})
        s.check_answer(*(names[:2] or ["empty"]))
    writes = (("/notes/ideas.txt", "paint the fence"), ("/archive/old.txt", "nothing to keep"),
              ("/projects/plan.md", "# Plan\nship v3"), ("/notes/call.txt", "call Raj at 5"),
              ("/projects/website/about.html", "<p>About Mei</p>"))
    for i, (path, content) in enumerate(writes):
        s = add(f"write-{i}", say(i, ("Create {p} with the text: {c}", "Write a new file {p} containing: {c}",
                                      "Save the text '{c}' as {p}."), p=path, c=content))
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
    # New files under /system too: the path alone decides (the rehearser learns the rule,
    # not a list of files).
    for i, (path, content) in enumerate((("/system/readme.txt", "hello"), ("/system/hosts", "127.0.0.1 box"),
                                         ("/system/readme.txt", "maintenance at 6"), ("/system/motd", "back at 9"),
                                         ("/system/network.ini", "proxy = 192.168.0.1"),
                                         ("/system/settings.conf", "timeout = 60"))):
        s = add(f"write-readonly-{i}", say(i, ("Write '{c}' into {p}.", "Make {p} say only: {c}",
                                               "Replace everything in {p} with the line: {c}"), p=path, c=content))
        r = s.call("write_file", {"path": path, "content": content, "overwrite": True}, f"I write {path}.")
        s.answer = f"I could not write {path}: {_error(r)['message']}."
        s.check_call("write_file", {"path": path, "content": content, "overwrite": True})
        s.check_state("files", path, exists=path in s.state("files"))
        s.check_answer("read-only")
    for i, path in enumerate(("/projects/reports", "/archive/2024", "/notes/travel")):
        s = add(f"mkdir-{i}", f"Create a directory {path}.")
        r = s.call("create_directory", {"path": path}, f"I create the directory {path}.")
        err = _error(r)
        s.answer = f"{path} already exists." if err else f"Created the directory {path}."
        s.check_state("directories", path)
    for i, path in enumerate(("/notes/todo.txt", "/projects/budget.csv", "/system/config.ini")):
        s = add(f"delete-{i}", f"Delete {path}.")
        r = s.call("delete_file", {"path": path}, f"I delete {path}.")
        err = _error(r)
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
    # Moves: into a directory that exists or not, onto a file that exists or not.
    for i, (src, dst) in enumerate((("/notes/todo.txt", "/archive"), ("/projects/budget.csv", "/archive/budget.csv"),
                                    ("/projects/website/style.css", "/projects/style.css"),
                                    ("/notes/todo.txt", "/notes/drafts/todo.txt"),
                                    ("/projects/budget.csv", "/archive/2023/budget.csv"),
                                    ("/notes/meeting-2025-03-10.md", "/archive/2024"),
                                    ("/projects/website/index.html", "/projects/old/index.html"))):
        s = add(f"move-{i}", say(i, ("Move {s} to {d}.", "Please move {s} over to {d}.", "Relocate {s} to {d}."),
                                 s=src, d=dst) if i >= 3 else f"Move {src} to {dst}.")
        r = s.call("move_file", {"source": src, "destination": dst}, f"I move {src} to {dst}.")
        _into_extra_dir(s, dst)
        err = _error(r)
        if err:
            s.answer = f"I could not move {src}: {err['message']}."
            s.check_call("move_file", {"source": src, "destination": dst})
            s.check_state("files", src, exists=src in s.state("files"))
        else:
            s.answer = f"Moved {src} to {r['destination']}."
            s.check_state("files", r["destination"], exists=True)
            s.check_state("files", src, exists=False)
    for i, (src, dst) in enumerate((("/notes/todo.txt", "/archive/todo-copy.txt"),
                                    ("/system/readme.txt", "/notes/readme-copy.txt"),
                                    ("/projects/website/index.html", "/archive/index.html"),
                                    ("/notes/meeting-2025-03-10.md", "/archive/meeting-notes.md"),
                                    ("/system/config.ini", "/notes/config-backup.ini"))):
        s = add(f"copy-{i}", say(i, ("Copy {s} to {d}, keeping the original.", "Back up {s} as {d}; keep the original.",
                                     "Duplicate {s} as {d} and leave the original where it is."), s=src, d=dst))
        r = s.call("read_file", {"path": src}, f"To copy {src} I read it first.")
        err = _error(r)
        if err:
            s.answer = f"I could not copy it: {err['message']}."
            s.check_call("read_file", {"path": src})
            continue
        w = s.call("write_file", {"path": dst, "content": r["content"]}, f"Now I write its content to {dst}.")
        err = _error(w)
        s.answer = f"I could not copy it: {err['message']}." if err else f"Copied {src} to {dst}."
        s.check_state("files", dst)
        s.check_state("files", src, exists=True)


# ---- library ------------------------------------------------------------------------


def _library(add: Callable[[str, str], _Script], say: Callable[..., str]) -> None:
    env_books = create("library").state()["books"]
    for i, book_id in enumerate(("BK-001", "BK-005", "BK-010", "BK-014", "BK-020", "BK-027", "BK-033", "BK-040",
                                 "BK-008", "BK-019", "BK-031", "BK-036")):
        book = env_books[book_id]
        s = add(f"book-{book_id}", say(i, ("Where is book {b} shelved, and can I borrow a copy today?",
                                           "Is a copy of {t} ({b}) available, and on which shelf?",
                                           "Look up book {b} for me: shelf and copies available."),
                                       b=book_id, t=book["title"]))
        r = s.call("get_book", {"book_id": book_id}, f"I look up {book_id}.")
        avail = f"{r['available']} of {r['copies']} copies are available" if r["available"] else "no copy is available now"
        s.answer = f"{r['title']} by {r['author']} is on shelf {r['shelf']}; {avail}."
        s.check_call("get_book", {"book_id": book_id})
        s.check_answer(r["shelf"])
    for title in ("Dune", "Emma", "Dracula", "Cosmos", "The Hobbit", "Frankenstein", "Neuromancer"):
        s = add(f"who-wrote-{title.lower().replace(' ', '-')}", f"Who wrote {title}?")
        r = s.call("search_catalog", {"query": title}, f"I search the catalog for {title}.")
        hit = next(h for h in r["results"] if h["title"] == title)
        s.answer = f"{title} was written by {hit['author']} ({hit['year']})."
        s.check_answer(hit["author"].split()[-1])
    for author in ("Jane Austen", "George Orwell", "Agatha Christie", "Ursula K. Le Guin"):
        s = add(f"author-{author.split()[-1].lower()}", f"Which books by {author} does the library have?")
        r = s.call("list_books", {"author": author.split()[-1]}, f"I list the books by {author}.")
        titles = [b["title"] for b in r["books"]]
        s.answer = f"The library has {len(titles)} book(s) by {author}: {', '.join(titles)}."
        s.check_answer(*titles[:2])
    for genre, extra, ask in (("fantasy", {"available_only": True}, "List the fantasy books with a copy available now."),
                              ("horror", {}, "Which horror books are in the catalog?"),
                              ("science", {"year_from": 1970}, "Which science books came out in 1970 or later?"),
                              ("classic", {"year_to": 1830}, "Which classics were published before 1831?"),
                              ("memoir", {}, "What memoirs does the library have?"),
                              ("science-fiction", {"year_from": 1960}, "Which science-fiction books are from 1960 or later?"),
                              ("mystery", {"year_to": 1934}, "Which mystery books in the catalog came out before 1935?"),
                              ("fiction", {"year_to": 1959}, "Which fiction books date from before 1960?"),
                              ("science", {"year_to": 1969}, "List the science books published before 1970.")):
        s = add(f"genre-{genre}-{'-'.join(k.split('_')[-1] for k in extra) or 'all'}", ask)
        r = s.call("list_books", {"genre": genre, **extra}, f"I list the {genre} books with the filters asked for.")
        titles = [b["title"] for b in r["books"]]
        s.answer = f"{', '.join(titles)}." if titles else "None found."
        s.check_call("list_books", {"genre": genre, **extra})
        s.check_answer(*titles[:2])
    # A request with an id the catalog does not have (the catalog ends at BK-041): get_book
    # answers BOOK_NOT_FOUND in every world, then the catalog search finds the book. (A title
    # passed as the id never reaches the rehearser: it fails the id's pattern, and the engine
    # writes that refusal itself.)
    for i, (title, wrong) in enumerate((("Dune", "BK-050"), ("Emma", "BK-042"), ("Cosmos", "BK-073"),
                                        ("The Hobbit", "BK-099"), ("Beloved", "BK-045"), ("Dracula", "BK-061"),
                                        ("Foundation", "BK-088"))):
        s = add(f"wrong-id-{title.lower().replace(' ', '-')}", say(i, (
            "Is {t} ({b}) available to borrow right now?", "Can I borrow {t}, book {b}, today?",
            "How many copies of {t} ({b}) are on the shelf?"), t=title, b=wrong))
        r = s.call("get_book", {"book_id": wrong}, f"I look up {wrong}.")
        assert _error(r)["code"] == "BOOK_NOT_FOUND"
        r = s.call("search_catalog", {"query": title}, f"There is no {wrong}; I search the catalog for {title}.")
        hit = next(h for h in r["results"] if h["title"] == title)
        n = hit["available"]
        s.answer = (f"There is no book {wrong}; {title} is {hit['book_id']}, and "
                    + (f"{n} cop{'y is' if n == 1 else 'ies are'} available now." if n else "no copy is available now."))
        s.check_call("search_catalog", {"query": title})
        s.check_answer(hit["book_id"])
    # Holds: on books with no copy on the shelf (still placed: a queue), on books the patron
    # holds already (ALREADY_ON_HOLD comes before the limit), for the patron at the limit.
    for i, (book_id, patron) in enumerate((("BK-004", "P-1042"), ("BK-012", "P-1100"), ("BK-029", "P-1042"),
                                           ("BK-005", "P-1100"), ("BK-038", "P-1042"), ("BK-008", "P-1042"),
                                           ("BK-020", "P-1100"), ("BK-033", "P-1100"), ("BK-001", "P-1042"),
                                           ("BK-018", "P-1100"), ("BK-014", "P-1042"), ("BK-020", "P-1077"),
                                           ("BK-001", "P-1077"))):
        s = add(f"hold-{book_id}-{patron}", say(i, ("Place a hold on book {b} for library card {p}.",
                                                   "Hold {t} ({b}) for patron {p}.",
                                                   "Reserve {t} ({b}) for {p}, please."),
                                               b=book_id, p=patron, t=env_books[book_id]["title"]))
        r = s.call("place_hold", {"book_id": book_id, "patron_id": patron}, f"I place the hold on {book_id} for {patron}.")
        err = _error(r)
        if err is None:
            s.answer = f"Hold placed on {r['title']} for {patron}; queue position {r['queue_position']}."
        elif err["code"] == "ALREADY_ON_HOLD":
            s.answer = f"{patron} already has a hold on {book_id}."
        else:
            s.answer = f"I could not place the hold: {err['message']}."
        s.check_state("patrons", patron, "holds")
        if err:
            s.check_call("place_hold", {"book_id": book_id, "patron_id": patron})
            s.check_answer("already" if err["code"] == "ALREADY_ON_HOLD" else "limit")
    # P-1077 holds three books: any other hold of theirs is refused, whatever the book.
    for i, book_id in enumerate(("BK-002", "BK-016", "BK-028", "BK-011", "BK-035", "BK-038", "BK-006", "BK-024",
                                 "BK-039", "BK-014")):
        s = add(f"hold-limit-{book_id}", say(i, ("Put a hold on book {b} for patron P-1077.",
                                                 "Reserve {t} ({b}) for card P-1077.",
                                                 "Patron P-1077 would like to reserve {t} ({b})."),
                                             b=book_id, t=env_books[book_id]["title"]))
        r = s.call("place_hold", {"book_id": book_id, "patron_id": "P-1077"}, f"I place the hold on {book_id} for P-1077.")
        s.answer = f"I could not place the hold, P-1077 is at the hold limit: {_error(r)['message']}."
        s.check_state("patrons", "P-1077", "holds")
        s.check_call("place_hold", {"book_id": book_id, "patron_id": "P-1077"})
        s.check_answer("limit")
    for title, patron in (("Foundation", "P-1042"), ("Emma", "P-1100"), ("Dracula", "P-1042")):
        s = add(f"hold-title-{title.lower()}-{patron}", f"My card is {patron}. Please put a hold on {title} for me.")
        r = s.call("search_catalog", {"query": title}, f"I need the id of {title} first.")
        book_id = next(h["book_id"] for h in r["results"] if h["title"] == title)
        s.call("place_hold", {"book_id": book_id, "patron_id": patron}, f"{title} is {book_id}; I place the hold.")
        s.answer = f"Hold placed on {title} ({book_id}) for {patron}."
        s.check_state("patrons", patron, "holds")


_WRITERS = {"bank": _bank, "files": _files, "library": _library}
_READ_TOOLS = {
    "bank": {"get_account", "list_transactions"},
    "files": {"read_file", "list_directory"},
    "library": {"search_catalog", "list_books", "get_book"},
}


def generated_tasks(env: str, world: int | None = None, phrasing: int | None = None) -> list[ScriptedTask]:
    """The generated tasks of ``env`` with their scripts (split ``train``), each run on a
    fresh environment; ``world``: in that varied world (``worlds.py``), not the seeded one
    (the scripts' answers then follow its values; checks are kept for the seeded world).
    ``phrasing``: which wording of each request (default: the world's number, so each
    world words its requests its own way)."""
    if env not in _WRITERS:
        raise ValueError(f"no generated tasks for environment {env!r}; available: {', '.join(GENERATED_ENVS)}")
    tools = {env: create(env).tools()}
    scripts: list[_Script] = []

    def add(name: str, prompt: str) -> _Script:
        environment = create(env)
        if world is not None:
            from envace_demo.train.worlds import varied

            environment.vary_state(varied(env, world))
        script = _Script(env, environment, f"gen-{env}-{name}", prompt)
        scripts.append(script)
        return script

    turn = (world or 0) if phrasing is None else phrasing

    def say(i: int, phrasings: tuple[str, ...], **values: Any) -> str:
        """One of a request's phrasings, another in each varied world: the actor meets
        each request in several wordings for the same number of rows."""
        return phrasings[(i + turn) % len(phrasings)].format(**values)

    _WRITERS[env](add, say)
    out = []
    for s in scripts:
        record = {"name": s.name, "prompt": s.prompt, "env": env, "check": s.check, "split": "train"}
        task = task_from_record(record, f"generated:{s.name}", tools)
        reads_only = all(step.call.name in _READ_TOOLS[env] for step in s.steps)
        out.append(ScriptedTask(task, s.steps, s.answer, s.answer_thought, reads_only, s.rehearser_only))
    return out


def heldout_tasks(env: str) -> list[Task]:
    return [t for t in env_tasks(env) if t.split == "heldout"]


def _signature(calls: list[tuple[str, dict]]) -> str:
    return json.dumps(sorted((n, sorted(a.items())) for n, a in calls), default=str)


def _check_calls(task: Task) -> list[tuple[str, dict]]:
    """The calls a check asks for, each argument at its first accepted value."""
    out = []
    for expected in (task.check or {}).get("includes_calls", []):
        ((name, args),) = expected.items()
        out.append((name, {k: v[0] for k, v in args.items() if v and v[0] != ""}))
    return out


def overlaps_heldout(scripted: ScriptedTask, heldout: list[Task]) -> str | None:
    """Why ``scripted`` is too close to a held-out task (same request, the same calls its
    check asks for, one of those calls among its calls or context reads, or the same
    state check), or None."""
    mine = _signature([(c.name, c.arguments) for c in scripted.calls])
    shown = {_signature([(c.name, c.arguments)]) for step in scripted.steps
             for c in (step.call, *(read for read, _ in step.context))}
    prompt = " ".join(scripted.task.prompt.lower().split())
    for task in heldout:
        if " ".join(task.prompt.lower().split()) == prompt:
            return f"same request as held-out task {task.name}"
        wanted = _check_calls(task)
        if wanted and _signature(wanted) == mine:
            return f"same calls as held-out task {task.name}"
        for call in wanted:
            if _signature([call]) in shown:
                return f"shows the {call[0]} call held-out task {task.name} asks for"
        state = (task.check or {}).get("state")
        if state and state == (scripted.task.check or {}).get("state"):
            return f"same state check as held-out task {task.name}"
    return None


def training_tasks(
    envs: tuple[str, ...] = GENERATED_ENVS, world: int | None = None, phrasing: int | None = None
) -> list[ScriptedTask]:
    """Every generated task of ``envs`` that stays apart from the held-out ones (in varied
    ``world`` and with ``phrasing``, where given)."""
    out = []
    for env in envs:
        held = heldout_tasks(env)
        out.extend(t for t in generated_tasks(env, world, phrasing) if overlaps_heldout(t, held) is None)
    return out
