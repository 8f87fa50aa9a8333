"""A small retail bank: accounts, deposits, withdrawals, transfers, freezes.

Money is kept as floats rounded to cents (the state must stay JSON); amounts with
more than two decimals are refused rather than silently rounded. The bank's
business date is fixed so runs are reproducible.
"""

from __future__ import annotations

import math
from typing import Any

from envace_demo.envs._common import Failure, Handler, ToolEnvironment

BUSINESS_DATE = "2025-03-14"
MAX_AMOUNT = 1_000_000.00  # per transaction; also keeps cent arithmetic far from float overflow


def _account(
    owner: str,
    kind: str,
    balance: float,
    limit: float,
    status: str = "active",
    freeze_reason: str | None = None,
) -> dict[str, Any]:
    return {
        "owner": owner,
        "type": kind,
        "currency": "USD",
        "balance": balance,
        "status": status,
        "freeze_reason": freeze_reason,
        "daily_transfer_limit": limit,
        "transferred_today": 0.0,
    }


def _tx(
    number: int, date: str, account_id: str, kind: str, amount: float, description: str, balance_after: float
) -> dict[str, Any]:
    return {
        "transaction_id": f"TX-{number}",
        "date": date,
        "account_id": account_id,
        "type": kind,
        "amount": amount,
        "description": description,
        "balance_after": balance_after,
    }


def _seed() -> dict[str, Any]:
    return {
        "business_date": BUSINESS_DATE,
        "accounts": {
            "ACC-1001": _account("Alice Moreno", "checking", 1250.00, 2000.00),
            "ACC-1002": _account("Alice Moreno", "savings", 8400.00, 1000.00),
            "ACC-1003": _account("Ben Okafor", "checking", 310.25, 1500.00),
            "ACC-1004": _account("Chen Wei", "checking", 5000.00, 2000.00, "frozen", "suspected_fraud"),
            "ACC-1005": _account("Dana Kowalski", "savings", 15.50, 500.00),
        },
        # Oldest first; balances chain up to the seeded account balances.
        "transactions": [
            _tx(5001, "2025-03-01", "ACC-1002", "deposit", 400.00, "Monthly savings", 8400.00),
            _tx(5002, "2025-03-10", "ACC-1001", "deposit", 2100.00, "Payroll - Northwind Ltd", 2294.37),
            _tx(5003, "2025-03-11", "ACC-1001", "withdrawal", 60.00, "ATM withdrawal - 5th Ave", 2234.37),
            _tx(5004, "2025-03-11", "ACC-1003", "deposit", 450.00, "Payroll - City Cafe", 450.00),
            _tx(5005, "2025-03-12", "ACC-1001", "payment", 900.00, "Rent - Harbor Property Mgmt", 1334.37),
            _tx(5006, "2025-03-13", "ACC-1003", "payment", 139.75, "Electric bill - Metro Power", 310.25),
            _tx(5007, "2025-03-13", "ACC-1001", "payment", 84.37, "Grocery - Fresh Market", 1250.00),
        ],
        "next_transaction_number": 5008,
    }


def _cents(x: float) -> float:
    return round(x, 2)


class BankEnvironment(ToolEnvironment):
    name = "bank"
    description = "A retail bank: look up accounts and history, move money, freeze an account."

    def initial_state(self) -> dict[str, Any]:
        return _seed()

    def handlers(self) -> dict[str, Handler]:
        return {
            "get_account": self.get_account,
            "list_transactions": self.list_transactions,
            "deposit": self.deposit,
            "withdraw": self.withdraw,
            "transfer": self.transfer,
            "freeze_account": self.freeze_account,
        }

    def context_reads(self, name: str, arguments: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        keys = {"transfer": ("from_account_id", "to_account_id")}.get(name, ("account_id",))
        if not self.writes(name):
            return []
        ids = [arguments.get(k) for k in keys]
        return [("get_account", {"account_id": i}) for i in dict.fromkeys(ids) if isinstance(i, str) and i.strip()]

    # -- helpers ---------------------------------------------------------------

    def _lookup(self, raw_id: str) -> tuple[str, dict[str, Any]]:
        account_id = raw_id.strip().upper()
        account = self._state["accounts"].get(account_id)
        if account is None:
            raise Failure("ACCOUNT_NOT_FOUND", f"no account with id {raw_id!r}")
        return account_id, account

    def _active(self, raw_id: str) -> tuple[str, dict[str, Any]]:
        account_id, account = self._lookup(raw_id)
        if account["status"] == "frozen":
            raise Failure(
                "ACCOUNT_FROZEN",
                f"account {account_id} is frozen ({account['freeze_reason']}); no money can move in or out",
            )
        return account_id, account

    @staticmethod
    def _amount(value: float) -> float:
        if not math.isfinite(value) or value <= 0:
            raise Failure("INVALID_AMOUNT", f"amount must be a positive number, got {value}")
        if value > MAX_AMOUNT:
            raise Failure(
                "INVALID_AMOUNT", f"amount {value} is over the {MAX_AMOUNT:,.2f} USD per-transaction maximum"
            )
        if abs(value * 100 - round(value * 100)) > 1e-6:
            raise Failure("INVALID_AMOUNT", f"amount must be in whole cents, got {value}")
        return float(_cents(value))

    def _record(self, account_id: str, kind: str, amount: float, description: str, number: int) -> None:
        balance = self._state["accounts"][account_id]["balance"]
        self._state["transactions"].append(
            _tx(number, BUSINESS_DATE, account_id, kind, amount, description, balance)
        )

    def _next_number(self) -> int:
        number = self._state["next_transaction_number"]
        self._state["next_transaction_number"] = number + 1
        return number

    # -- tools -----------------------------------------------------------------

    def get_account(self, args: dict[str, Any]) -> dict[str, Any]:
        account_id, a = self._lookup(args["account_id"])
        return {
            "account_id": account_id,
            "owner": a["owner"],
            "type": a["type"],
            "currency": a["currency"],
            "balance": a["balance"],
            "status": a["status"],
            "daily_transfer_limit": a["daily_transfer_limit"],
            "transferred_today": a["transferred_today"],
        }

    def list_transactions(self, args: dict[str, Any]) -> dict[str, Any]:
        account_id, _ = self._lookup(args["account_id"])
        limit = int(args.get("limit", 5))
        mine = [t for t in reversed(self._state["transactions"]) if t["account_id"] == account_id]
        keep = ("transaction_id", "date", "type", "amount", "description", "balance_after")
        return {
            "account_id": account_id,
            "transactions": [{k: t[k] for k in keep} for t in mine[:limit]],
        }

    def deposit(self, args: dict[str, Any]) -> dict[str, Any]:
        amount = self._amount(args["amount"])
        account_id, account = self._active(args["account_id"])
        account["balance"] = _cents(account["balance"] + amount)
        number = self._next_number()
        self._record(account_id, "deposit", amount, args.get("description") or "Deposit", number)
        return {
            "transaction_id": f"TX-{number}",
            "account_id": account_id,
            "amount": amount,
            "new_balance": account["balance"],
        }

    def withdraw(self, args: dict[str, Any]) -> dict[str, Any]:
        amount = self._amount(args["amount"])
        account_id, account = self._active(args["account_id"])
        if amount > account["balance"]:
            raise Failure(
                "INSUFFICIENT_FUNDS",
                f"account {account_id} has {account['balance']:.2f} USD, cannot withdraw {amount:.2f}",
            )
        account["balance"] = _cents(account["balance"] - amount)
        number = self._next_number()
        self._record(account_id, "withdrawal", amount, "Withdrawal", number)
        return {
            "transaction_id": f"TX-{number}",
            "account_id": account_id,
            "amount": amount,
            "new_balance": account["balance"],
        }

    def transfer(self, args: dict[str, Any]) -> dict[str, Any]:
        amount = self._amount(args["amount"])
        source_id, source = self._active(args["from_account_id"])
        target_id, target = self._active(args["to_account_id"])
        if source_id == target_id:
            raise Failure("SAME_ACCOUNT", "from_account_id and to_account_id must differ")
        if amount > source["balance"]:
            raise Failure(
                "INSUFFICIENT_FUNDS",
                f"account {source_id} has {source['balance']:.2f} USD, cannot transfer {amount:.2f}",
            )
        remaining = _cents(source["daily_transfer_limit"] - source["transferred_today"])
        if amount > remaining:
            raise Failure(
                "DAILY_LIMIT_EXCEEDED",
                f"account {source_id} can transfer {remaining:.2f} USD more "
                f"today (limit {source['daily_transfer_limit']:.2f})",
            )
        source["balance"] = _cents(source["balance"] - amount)
        target["balance"] = _cents(target["balance"] + amount)
        source["transferred_today"] = _cents(source["transferred_today"] + amount)
        memo = args.get("memo") or "Transfer"
        number = self._next_number()
        self._record(source_id, "transfer_out", amount, f"{memo} to {target_id}", number)
        self._record(target_id, "transfer_in", amount, f"{memo} from {source_id}", number)
        return {
            "transaction_id": f"TX-{number}",
            "from_account_id": source_id,
            "to_account_id": target_id,
            "amount": amount,
            "from_balance": source["balance"],
            "to_balance": target["balance"],
            "remaining_daily_limit": _cents(remaining - amount),
        }

    def freeze_account(self, args: dict[str, Any]) -> dict[str, Any]:
        account_id, account = self._lookup(args["account_id"])
        if account["status"] == "frozen":
            raise Failure("ALREADY_FROZEN", f"account {account_id} is already frozen")
        account["status"] = "frozen"
        account["freeze_reason"] = args["reason"]
        return {"account_id": account_id, "status": "frozen", "reason": args["reason"]}
