"""Generated tasks over the ``bank`` environment: balances, histories, deposits,
withdrawals, transfers (the daily limit included) and freezes; questions about one past
transaction, refunds of one, whole balances withdrawn, transfers with a memo."""

from __future__ import annotations

from collections.abc import Callable

from envace_demo.train.generate.script import Add, Say, Script, error, money

READ_TOOLS = {"get_account", "list_transactions"}
_ACCOUNTS = ("ACC-1001", "ACC-1002", "ACC-1003", "ACC-1004", "ACC-1005")


def _balances(add: Add, say: Say) -> None:
    """Balances and statuses of the accounts."""
    balance_asks = (
        "What is the balance of account {a}?",
        "How much money is in account {a} right now?",
        "Check the balance on my account {a}, please.",
    )
    for i, a in enumerate(_ACCOUNTS):
        for j, ask in enumerate(balance_asks[: 2 if i % 2 else 3]):
            s = add(f"balance-{a[-4:]}-{j}", ask.format(a=a))
            r = s.call("get_account", {"account_id": a}, f"The user wants the balance of {a}; I look the account up.")
            s.answer = f"Account {a} ({r['owner']}, {r['type']}) has a balance of {money(r['balance'])} USD."
            s.check_call("get_account", {"account_id": a})
            s.check_answer(money(r["balance"]))
    for i, a in enumerate(("ACC-1003", "ACC-1004", "ACC-1005")):
        s = add(f"status-{a[-4:]}", say(i, ("Is account {a} active or frozen?", "What is the status of account {a}?",
                                            "Is {a} frozen, or can it be used?"), a=a))
        r = s.call("get_account", {"account_id": a}, f"I look up account {a} to see its status.")
        s.answer = f"Account {a} is {r['status']}."
        s.check_call("get_account", {"account_id": a})
        s.check_answer(r["status"])


def _questions(add: Add, say: Say) -> None:
    """One fact asked for: whether anything blocks an account; the latest amount."""
    for i, a in enumerate(("ACC-1001", "ACC-1002", "ACC-1003", "ACC-1005")):
        s = add(f"blocked-{a[-4:]}", say(i, ("Can I still use account {a}, or is something wrong with it?",
                                             "Is anything blocking account {a}?",
                                             "Tell me what is going on with account {a}."), a=a))
        r = s.call("get_account", {"account_id": a}, f"I look up account {a} to see whether it is frozen.")
        s.answer = (f"Account {a} is frozen: no money can move in or out of it." if r["status"] == "frozen"
                    else f"Account {a} is {r['status']}; nothing blocks it.")
        s.check_call("get_account", {"account_id": a})
        s.check_answer(r["status"])
    for i, a in enumerate(("ACC-1002", "ACC-1003", "ACC-1005")):
        s = add(f"latest-amount-{a[-4:]}", say(i, ("How much was the latest transaction on {a}?",
                                                   "What amount did the most recent transaction on {a} have?",
                                                   "Tell me the amount of the newest transaction on account {a}."),
                                               a=a))
        r = s.call("list_transactions", {"account_id": a, "limit": 1}, f"I list the newest transaction of {a}.")
        s.check_call("list_transactions", {"account_id": a, "limit": 1})
        if not r["transactions"]:
            s.answer = f"Account {a} has no transactions on record."
            s.check_answer("no transactions")
            continue
        t = r["transactions"][0]
        s.answer = f"The latest transaction on {a} was {t['description']} on {t['date']}: {money(t['amount'])} USD."
        s.check_answer(money(t["amount"]))


def _histories(add: Add, say: Say) -> None:
    """The latest transactions of an account."""
    for a, n in (("ACC-1001", 1), ("ACC-1001", 2), ("ACC-1001", 5), ("ACC-1003", 2), ("ACC-1003", 1),
                 ("ACC-1002", 3), ("ACC-1002", 1), ("ACC-1005", 3)):
        s = add(f"history-{a[-4:]}-{n}", say(n + len(a), (
            "Show the last {n} transaction{s} of account {a}.",
            "What were the {n} most recent transaction{s} on {a}?",
            "List the latest {n} transaction{s} for account {a}, please.",
            "Give me the {n} newest transaction{s} on account {a}.",
            "Which {n} transaction{s} happened last on {a}?",
        ), n=n, a=a, s="s" if n > 1 else ""))
        r = s.call("list_transactions", {"account_id": a, "limit": n},
                   f"The user wants the {n} most recent transactions of {a}.")
        txs = r["transactions"]
        if txs:
            listed = "; ".join(f"{t['date']} {t['description']} {money(t['amount'])} USD" for t in txs)
            s.answer = f"The last transactions of {a}: {listed}."
            s.check_answer(txs[0]["description"])
        else:
            s.answer = f"Account {a} has no transactions on record."
            s.check_answer("no transactions")
        s.check_call("list_transactions", {"account_id": a, "limit": n})


def _deposits(add: Add, say: Say) -> None:
    """Deposits, refused on a frozen account."""
    for a, amount in (("ACC-1001", 250.0), ("ACC-1002", 40.0), ("ACC-1005", 100.0), ("ACC-1001", 75.5),
                      ("ACC-1004", 60.0), ("ACC-1005", 12.25), ("ACC-1004", 1000.0), ("ACC-1003", 35.0)):
        s = add(f"deposit-{a[-4:]}-{amount:g}", say(int(amount), (
            "Deposit ${x:g} into account {a}.", "Please put ${x:g} into my account {a}.", "Add ${x:g} to account {a}.",
            "Credit ${x:g} to account {a}.", "Pay ${x:g} into {a}, please.",
        ), x=amount, a=a))
        r = s.call("deposit", {"account_id": a, "amount": amount}, f"I deposit {amount:g} USD into {a}.")
        err = error(r)
        if err:
            s.answer = f"The deposit failed: account {a} is frozen, so no money can move in or out."
            s.check_answer("frozen")
        else:
            s.answer = f"Deposited {money(amount)} USD into {a}; the new balance is {money(r['new_balance'])} USD."
        s.check_state("accounts", a, "balance")


def _withdrawals(add: Add, say: Say) -> None:
    """Withdrawals, over the balance or not, on a frozen account or not, as the world has it
    (the seeded world: ACC-1005 holds 15.50, ACC-1003 310.25, ACC-1004 is frozen)."""
    for a, amount in (("ACC-1001", 100.0), ("ACC-1002", 500.0), ("ACC-1003", 50.0), ("ACC-1003", 900.0),
                      ("ACC-1005", 20.0), ("ACC-1004", 30.0), ("ACC-1003", 450.0), ("ACC-1001", 1300.0),
                      ("ACC-1005", 15.0), ("ACC-1002", 75.0), ("ACC-1004", 500.0), ("ACC-1005", 60.0),
                      ("ACC-1001", 20.0), ("ACC-1003", 310.0)):
        s = add(f"withdraw-{a[-4:]}-{amount:g}", say(int(amount), (
            "Withdraw ${x:g} from account {a}.", "Take ${x:g} out of {a}.", "I need to withdraw ${x:g} from my account {a}.",
            "I'd like ${x:g} in cash from account {a}.", "Cash out ${x:g} from {a}.",
            "Get me ${x:g} out of account {a}.",
        ), x=amount, a=a))
        r = s.call("withdraw", {"account_id": a, "amount": amount}, f"I withdraw {amount:g} USD from {a}.")
        err = error(r)
        if err and err["code"] == "INSUFFICIENT_FUNDS":
            s.answer = f"I could not withdraw it: {err['message']} (insufficient funds)."
            s.check_answer("insufficient")
        elif err:
            s.answer = f"I could not withdraw it: {err['message']}."
            s.check_answer("frozen")
        else:
            s.answer = f"Withdrew {money(amount)} USD from {a}; the new balance is {money(r['new_balance'])} USD."
        s.check_state("accounts", a, "balance")
        s.check_call("withdraw", {"account_id": a, "amount": amount})


def _moved(s: Script, result: dict, src: str, dst: str, what: str, done: Callable[[dict], str]) -> None:
    """The answer and check of a transfer: ``done(result)`` where it went through, else the
    refusal's word (insufficient, frozen, limit) and message."""
    err = error(result)
    if err:
        word = {"INSUFFICIENT_FUNDS": "insufficient", "ACCOUNT_FROZEN": "frozen"}.get(err["code"], "limit")
        s.answer = f"The {what} did not go through ({word}): {err['message']}."
        s.check_answer(word)
    else:
        s.answer = done(result)
    s.check_state("accounts", src, "balance")
    s.check_state("accounts", dst, "balance")


def _transfers(add: Add, say: Say) -> None:
    """Transfers between two accounts, through or refused."""
    # Transfers: over the balance, from or to a frozen account, over the daily limit, or through.
    for src, dst, amount in (("ACC-1001", "ACC-1003", 100.0), ("ACC-1002", "ACC-1005", 300.0),
                             ("ACC-1003", "ACC-1001", 60.0), ("ACC-1001", "ACC-1004", 50.0),
                             ("ACC-1005", "ACC-1002", 200.0), ("ACC-1005", "ACC-1001", 50.0),
                             ("ACC-1003", "ACC-1002", 400.0), ("ACC-1001", "ACC-1005", 1500.0),
                             ("ACC-1004", "ACC-1003", 100.0), ("ACC-1002", "ACC-1004", 250.0),
                             ("ACC-1003", "ACC-1005", 25.0), ("ACC-1002", "ACC-1001", 700.0),
                             # Over ACC-1002's daily limit with no word of what to do then: the
                             # refusal is the answer. Without these the one over-limit family
                             # (_limit_transfers, "...send the most allowed instead") taught the
                             # actor to move the limit whenever a transfer was refused.
                             ("ACC-1002", "ACC-1003", 1500.0), ("ACC-1002", "ACC-1005", 2200.0)):
        s = add(f"transfer-{src[-4:]}-{dst[-4:]}-{amount:g}", say(int(amount), (
            "Transfer ${x:g} from {src} to {dst}.", "Move ${x:g} from my account {src} to {dst}.",
            "Send ${x:g} from {src} to account {dst}.", "Pay ${x:g} from {src} to {dst}.",
            "Wire ${x:g} from account {src} into {dst}.",
        ), x=amount, src=src, dst=dst))
        r = s.call("transfer", {"from_account_id": src, "to_account_id": dst, "amount": amount},
                   f"I move {amount:g} USD from {src} to {dst}.")
        _moved(s, r, src, dst, "transfer", lambda r: (
            f"Transferred {money(amount)} USD from {src} to {dst}. {src} now has "
            f"{money(r['from_balance'])} USD and {dst} has {money(r['to_balance'])} USD."))


def _limit_transfers(add: Add, say: Say) -> None:
    """Transfers over ACC-1002's daily limit, then the most it allows."""
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
        err = error(r)
        source = s.state("accounts", "ACC-1002")
        allowed = round(source["daily_transfer_limit"] - source["transferred_today"], 2)
        if err and err["code"] == "DAILY_LIMIT_EXCEEDED" and allowed > 0:
            r = s.call("transfer", {"from_account_id": "ACC-1002", "to_account_id": dst, "amount": allowed},
                       f"Over the daily limit; {allowed:g} USD is what can still move today.")
            err = error(r)
        if err:
            s.answer = f"The transfer did not go through: {err['message']}."
        elif r["amount"] == amount:
            s.answer = (f"Transferred the full {money(amount)} USD from ACC-1002 to {dst}; ACC-1002 now has "
                        f"{money(r['from_balance'])} USD.")
        else:
            s.answer = (f"The full amount was over the daily limit, so I transferred {money(allowed)} USD; "
                        f"ACC-1002 now has {money(r['from_balance'])} USD.")
        s.check_state("accounts", "ACC-1002", "balance")
        s.check_state("accounts", dst, "balance")


def _freezes(add: Add, say: Say) -> None:
    """Freezing an account, frozen already or not."""
    for a, reason, ask in (("ACC-1001", "stolen_card", "My card was stolen, freeze account {a} now."),
                           ("ACC-1002", "customer_request", "Please freeze my account {a}, I am travelling."),
                           ("ACC-1005", "lost_card", "I lost my card; freeze account {a}."),
                           ("ACC-1004", "lost_card", "I lost my card, freeze {a} please.")):
        s = add(f"freeze-{a[-4:]}", ask.format(a=a))
        r = s.call("freeze_account", {"account_id": a, "reason": reason}, f"I freeze {a} with reason {reason}.")
        err = error(r)
        s.answer = f"Account {a} was already frozen." if err else f"Account {a} is now frozen ({reason})."
        s.check_state("accounts", a, "status")
        s.check_answer("frozen")


# What a user calls a transaction, by the first part of its description.
_KINDS = {"Rent": "rent", "Payroll": "paycheck", "Grocery": "grocery bill", "Phone bill": "phone bill",
          "Water bill": "water bill", "Electric bill": "electric bill", "Gym": "gym fee", "Coffee": "coffee",
          "Bookshop": "bookshop purchase", "Pharmacy": "pharmacy charge", "Bakery": "bakery charge",
          "Refund": "refund", "ATM withdrawal": "ATM withdrawal", "Monthly savings": "savings deposit"}
# (account, kind) pairs of the seeded world a measuring set asks about: taught in varied
# worlds only, where the amounts differ.
_MONEY_IN = {"Payroll", "Refund", "Monthly savings"}
_MEASURED = {("ACC-1001", "Rent"), ("ACC-1001", "Grocery"), ("ACC-1003", "Payroll"), ("ACC-1003", "Electric bill")}


def _prefix(t: dict) -> str:
    """The first part of a transaction's description ("Rent" of "Rent - Oak Tower")."""
    return t["description"].split(" - ")[0]


def _named_transaction(s: Script, a: str, i: int, charges: bool = False) -> dict | None:
    """A transaction of ``a`` the request can name by its kind (another each ``i``; money
    out only, with ``charges``), in the script's world, or None where there is none (in the
    seeded world, none a measuring set asks about)."""
    seeded = s.seeded()
    mine = [t for t in s.state("transactions") if t["account_id"] == a
            and not (charges and _prefix(t) in _MONEY_IN) and not (seeded and (a, _prefix(t)) in _MEASURED)]
    return mine[i % len(mine)] if mine else None


def _kind(t: dict) -> str:
    return _KINDS.get(_prefix(t), _prefix(t).lower())


def _history_questions(add: Add, say: Say) -> None:
    """A question about one past transaction (the rent, the paycheck): the history has it,
    the account record does not."""
    # ACC-1003 is left out: in the seeded world, measuring sets ask about both its transactions.
    for i, a in enumerate(("ACC-1001", "ACC-1001", "ACC-1002", "ACC-1001", "ACC-1002", "ACC-1001")):
        s = add(f"history-question-{a[-4:]}-{i}", "")
        t = _named_transaction(s, a, i)
        if t is None:
            s.prompt = say(i, ("What was the last payment on {a}?",
                               "What did the latest transaction on {a} come to?"), a=a)
            s.call("list_transactions", {"account_id": a, "limit": 10}, f"I read the history of {a}.")
            s.answer = f"Account {a} has no transactions on record."
            s.check_answer("no transactions")
            continue
        k = _kind(t)
        s.prompt = say(i, ("How much was the {k} on {a}?", "What did the {k} on account {a} come to?",
                           "{a}: how much was my last {k}, and when?", "{a} - what was the {k}?",
                           "Can you check what the {k} on {a} was?"), k=k, a=a)
        r = s.call("list_transactions", {"account_id": a, "limit": 10},
                   f"The {k} is a past transaction: I read the history of {a}, not the account.")
        t = next(x for x in r["transactions"] if x["transaction_id"] == t["transaction_id"])
        s.answer = f"The {k} on {a} was {money(t['amount'])} USD ({t['description']}, {t['date']})."
        s.check_answer(money(t["amount"]))


def _refunds(add: Add, say: Say) -> None:
    """The amount of a past transaction put back: the history first, then the deposit."""
    for i, a in enumerate(("ACC-1001", "ACC-1001", "ACC-1002", "ACC-1001")):
        s = add(f"refund-{a[-4:]}-{i}", "")
        t = _named_transaction(s, a, i + 1, charges=True)
        if t is None:
            s.prompt = f"Refund the last charge on {a} by depositing the same amount back."
            s.call("list_transactions", {"account_id": a, "limit": 10}, f"I look for the last charge on {a}.")
            s.answer = f"Account {a} has no charge on record, so there is nothing to refund."
            s.check_state("accounts", a, "balance")
            s.check_answer("no charge")
            continue
        k = _kind(t)
        s.prompt = say(i, ("The {k} on {a} was a mistake; deposit the same amount back into {a}.",
                           "Please refund the {k} on {a}: put that amount back in the account.",
                           "I'm getting the {k} on {a} back. Credit the same amount to {a}."), k=k, a=a)
        r = s.call("list_transactions", {"account_id": a, "limit": 10},
                   f"I find the amount of the {k} on {a} first.")
        amount = next(x for x in r["transactions"] if x["transaction_id"] == t["transaction_id"])["amount"]
        r = s.call("deposit", {"account_id": a, "amount": amount}, f"The {k} was {amount:g} USD; I deposit it.")
        err = error(r)
        s.answer = (f"The deposit failed: account {a} is frozen, so no money can move in or out." if err
                    else f"Deposited {money(amount)} USD (the {k}) into {a}; the new balance is "
                    f"{money(r['new_balance'])} USD.")
        s.check_state("accounts", a, "balance")


def _withdraw_all(add: Add, say: Say) -> None:
    """Everything in an account taken out: the balance read first, then withdrawn."""
    # Not ACC-1005: a measuring set asks to empty it.
    for i, a in enumerate(("ACC-1001", "ACC-1003", "ACC-1002", "ACC-1004")):
        s = add(f"withdraw-all-{a[-4:]}", say(i, (
            "Withdraw everything from account {a}.", "Empty my account {a}: take all of it out in cash.",
            "I'm closing {a}. Cash out the whole balance, please.", "take every cent out of {a}"), a=a))
        r = s.call("get_account", {"account_id": a}, f"To take everything out I read the balance of {a} first.")
        if r["status"] == "frozen":
            s.answer = f"Account {a} is frozen, so no money can be withdrawn."
            s.check_answer("frozen")
        elif r["balance"] <= 0:
            s.answer = f"Account {a} is empty; there is nothing to withdraw."
            s.check_answer("nothing to withdraw")
        else:
            w = s.call("withdraw", {"account_id": a, "amount": r["balance"]},
                       f"{a} holds {r['balance']:g} USD; I withdraw all of it.")
            s.answer = (f"Withdrew {money(r['balance'])} USD from {a}; the new balance is "
                        f"{money(w['new_balance'])} USD.")
        s.check_state("accounts", a, "balance")


def _memo_transfers(add: Add, say: Say) -> None:
    """Transfers with a note, and payments into a named person's account."""
    for i, (src, dst, amount, memo) in enumerate((("ACC-1002", "ACC-1001", 120.0, "Gym refund"),
                                                  ("ACC-1001", "ACC-1003", 35.0, "Pizza night"),
                                                  ("ACC-1003", "ACC-1001", 80.0, "Concert tickets"),
                                                  ("ACC-1001", "ACC-1005", 60.0, "Birthday gift"))):
        s = add(f"transfer-memo-{src[-4:]}-{dst[-4:]}", say(i, (
            "Transfer ${x:g} from {src} to {dst} with the memo '{m}'.",
            "Send ${x:g} from {src} to {dst}, note: {m}",
            "Move ${x:g} from {src} to {dst} and put '{m}' as the memo."), x=amount, src=src, dst=dst, m=memo))
        r = s.call("transfer", {"from_account_id": src, "to_account_id": dst, "amount": amount, "memo": memo},
                   f"I move {amount:g} USD from {src} to {dst} with the memo {memo}.")
        _moved(s, r, src, dst, "transfer",
               lambda r: f"Transferred {money(amount)} USD from {src} to {dst} ('{memo}').")
    for i, (src, dst, amount) in enumerate((("ACC-1002", "ACC-1003", 75.0), ("ACC-1003", "ACC-1005", 20.0),
                                            ("ACC-1002", "ACC-1004", 40.0), ("ACC-1005", "ACC-1001", 10.0))):
        s = add(f"pay-into-{src[-4:]}-{dst[-4:]}", "")
        owner = s.state("accounts", dst, "owner")
        s.prompt = say(i, ("Can you pay ${x:g} from {src} into {o}'s account {dst}?",
                           "Please send {o} ${x:g}: from my {src} to their account {dst}.",
                           "Pay {o} (account {dst}) ${x:g} out of {src}."), x=amount, src=src, dst=dst, o=owner)
        r = s.call("transfer", {"from_account_id": src, "to_account_id": dst, "amount": amount},
                   f"Paying into another account is a transfer from {src} to {dst}.")
        _moved(s, r, src, dst, "payment",
               lambda r: f"Paid {money(amount)} USD from {src} into {owner}'s account {dst}.")


def write(add: Add, say: Say) -> None:
    """Every bank family, in order."""
    _balances(add, say)
    _histories(add, say)
    _deposits(add, say)
    _withdrawals(add, say)
    _transfers(add, say)
    _limit_transfers(add, say)
    _freezes(add, say)
    _questions(add, say)
    _history_questions(add, say)
    _refunds(add, say)
    _withdraw_all(add, say)
    _memo_transfers(add, say)
