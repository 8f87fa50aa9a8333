"""The other value a request gives for when its first one fails (``engine/fallback.py``): the
pure parts here; an episode where the held write takes the fallback path is in test_repair."""

from __future__ import annotations

from envace_demo.engine.fallback import amount_calls, fallback_calls, fallbacks, rest_calls
from envace_demo.envs.registry import create
from envace_demo.record import ToolCall

READONLY = ('Please save a file /system/maintenance.txt containing exactly "proxy change requested". '
            "If that location isn't writable, save it as /notes/maintenance.txt instead.")
TAKEN = ("Make a new file /notes/todo.txt that says exactly: water the plants\n"
         "If a file with that name is already there, don't overwrite it; call the new one /notes/todo-2.txt instead.")


def test_the_paths_a_conditional_sentence_gives():
    assert fallbacks(READONLY) == ["/notes/maintenance.txt"]
    assert fallbacks(TAKEN) == ["/notes/todo-2.txt"]  # "instead" after the value it gives
    assert fallbacks("Write /notes/a.txt saying hi. If it exists, name it b.txt instead") == ["b.txt"]
    assert fallbacks("Save it to /notes/a.txt instead of /notes/b.txt") == ["/notes/a.txt"]  # not what it replaces
    assert fallbacks("Save it to /notes/a.txt and /notes/b.txt") == []  # no condition: both are the request's


def test_the_held_write_with_the_fallback_path():
    held = ToolCall("write_file", {"path": "/system/maintenance.txt", "content": "proxy change requested"})
    assert fallback_calls(held, [READONLY]) == [ToolCall("write_file", {**held.arguments,
                                                                         "path": "/notes/maintenance.txt"})]
    bare = fallback_calls(ToolCall("write_file", {"path": "/notes/a.txt", "content": "hi"}),
                          ["Write /notes/a.txt saying hi. If it exists, name it b.txt instead"])
    assert bare == [ToolCall("write_file", {"path": "/notes/b.txt", "content": "hi"})]  # in the held path's folder
    assert fallback_calls(ToolCall("write_file", {"path": "/notes/maintenance.txt", "content": "x"}), [READONLY]) == []


def test_what_is_left_is_the_real_balance_the_foreseen_failure_names():
    request = "take $50 cash out of ACC-1005. if there isn't that much in there just take out whatever's left"
    held = ToolCall("withdraw", {"account_id": "ACC-1005", "amount": 50.0})
    context = [{"call": {}, "result": create("bank").execute("get_account", {"account_id": "ACC-1005"})}]
    foreseen = {"error": {"code": "INSUFFICIENT_FUNDS", "message": "account ACC-1005 has 15.50 USD, cannot withdraw 50.00"}}
    assert rest_calls(held, [request], foreseen, context) == [ToolCall("withdraw", {"account_id": "ACC-1005",
                                                                                    "amount": 15.5})]
    assert rest_calls(held, ["take $50 cash out of ACC-1005"], foreseen, context) == []  # no fallback asked
    # A number the foreseen failure names that no real read holds is the rehearsal's alone.
    invented = {"error": {"code": "INSUFFICIENT_FUNDS", "message": "account ACC-1005 has 12.00 USD"}}
    assert rest_calls(held, [request], invented, context) == []


def test_what_the_bank_allows_is_the_limit_the_foreseen_failure_names():
    request = ("I need $1,500 moved from my savings ACC-1002 to ACC-1001 today. If the bank won't let the full "
               "amount through today, send as much as it will allow.")
    held = ToolCall("transfer", {"from_account_id": "ACC-1002", "to_account_id": "ACC-1001", "amount": 1500.0})
    bank = create("bank")
    context = [{"call": {}, "result": bank.execute("get_account", {"account_id": a})} for a in ("ACC-1002", "ACC-1001")]
    foreseen = bank.execute("transfer", held.arguments)  # DAILY_LIMIT_EXCEEDED: 1000.00 more today
    assert rest_calls(held, [request], foreseen, context) == [ToolCall("transfer", {**held.arguments, "amount": 1000.0})]
    # "the max it allows", "the maximum", "the most it lets me": the same fallback.
    for wording in ("if thats over the daily transfer limit just send the max it allows today instead",
                    "If that's too much for one day, send the most it lets me."):
        assert rest_calls(held, [wording], foreseen, context) == [ToolCall("transfer", {**held.arguments, "amount": 1000.0})]


def test_the_sum_a_branch_asks_for_instead():
    request = ("I'd like to take $400 in cash out of ACC-1003. If there isn't enough in the account for that, "
               "withdraw $300 instead. How much is left in there afterwards?")
    held = ToolCall("withdraw", {"account_id": "ACC-1003", "amount": 400})
    assert amount_calls(held, [request]) == [ToolCall("withdraw", {"account_id": "ACC-1003", "amount": 300.0})]
    # A condition's own sum is no fallback: "more than $5,000" is what the balance is weighed against.
    topup = "If ACC-1002 has more than $5,000 in it, transfer $750 to ACC-1001."
    move = ToolCall("transfer", {"from_account_id": "ACC-1002", "to_account_id": "ACC-1001", "amount": 750})
    assert amount_calls(move, [topup]) == []
    assert amount_calls(held, ["If that fails, take out 250 dollars."]) == [ToolCall("withdraw", {**held.arguments, "amount": 250.0})]
