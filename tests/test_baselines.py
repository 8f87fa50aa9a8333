from dataclasses import dataclass, field
from typing import Any

from envace_demo.baselines import BASELINES, baseline_parts, baseline_scores, echo, placeholder, schema_only
from envace_demo.fidelity import Context, fidelity, score
from envace_demo.schemas import Tool

RESPONSE = {
    "type": "object",
    "properties": {
        "account_id": {"type": "string"},
        "owner": {"type": "string"},
        "balance": {"type": "number"},
        "status": {"enum": ["active", "frozen"]},
        "limits": {"type": "object", "properties": {"daily": {"type": ["integer", "null"]}}},
        "tags": {"type": "array", "items": {"type": "string"}},
        "overdraft": {"type": "boolean"},
    },
}
TOOL = Tool(
    name="get_balance",
    original_name="get_balance",
    description="The balance of one account.",
    parameters={"type": "object", "properties": {"account_id": {"type": "string"}}},
    response=RESPONSE,
)
REAL = {"account_id": "ACC-1003", "owner": "Ben Okafor", "balance": 310.25}
FUNDS = {"error": {"code": "INSUFFICIENT_FUNDS", "message": "ACC-1003 has 310.25, needs 500.00"}}


@dataclass
class _Call:
    name: str
    arguments: dict


@dataclass
class _Step:
    call: _Call
    real: Any = None
    known: tuple = field(default=())


def test_schema_only_fills_the_declared_shape_with_placeholders():
    assert schema_only(TOOL, {"account_id": "ACC-1003"}) == {
        "account_id": "",
        "owner": "",
        "balance": 0,
        "status": "active",
        "limits": {"daily": 0},
        "tags": [],
        "overdraft": False,
    }
    bare = Tool(name="t", original_name="t", description="", parameters={"type": "object"})
    assert schema_only(bare, {"x": 1}) == {}
    assert schema_only(None, {"x": 1}) == {}


def test_placeholder_unions_and_consts():
    assert placeholder({"anyOf": [{"type": "null"}, {"type": "integer"}]}) == 0
    assert placeholder({"const": "ok"}) == "ok"
    assert placeholder({"type": "null"}) is None
    assert placeholder({}) is None


def test_echo_returns_a_copy_of_the_arguments():
    arguments = {"account_id": "ACC-1003", "filters": {"kind": "checking"}}
    out = echo(TOOL, arguments)
    assert out == arguments and out is not arguments
    out["filters"]["kind"] = "x"
    assert arguments["filters"]["kind"] == "checking"
    assert set(BASELINES) == {"schema-only", "echo"}


def test_echo_scores_the_knowable_leaves_and_nothing_else():
    arguments = {"account_id": "ACC-1003"}
    s = score(echo(TOOL, arguments), REAL, Context(arguments=arguments))
    assert s.outcome_right and s.knowable == 1.0 and s.unknowable == 0.0
    assert fidelity(echo(TOOL, arguments), REAL) == round(0.5 + 0.5 / 3, 4)


def test_baselines_never_predict_a_failure():
    assert fidelity(echo(TOOL, {"account_id": "ACC-1003"}), FUNDS) == 0.0
    assert fidelity(schema_only(TOOL, {}), FUNDS) == 0.0


def test_baseline_parts_score_each_baseline_over_the_steps_with_a_real_response():
    steps = [
        _Step(_Call("get_balance", {"account_id": "ACC-1003"}), REAL),
        _Step(_Call("get_balance", {"account_id": "ACC-1003"}), FUNDS),
        _Step(_Call("get_balance", {"account_id": "ACC-9999"}), None),  # not executed: skipped
    ]

    def context_of(step: _Step) -> Context:
        return Context(arguments=step.call.arguments, known=step.known, description=TOOL.description)

    scores = baseline_scores(steps, context_of, [TOOL])
    assert [len(v) for v in scores.values()] == [2, 2]
    parts = baseline_parts(steps, context_of, [TOOL])
    assert parts["echo"] == {
        "calls": 2,
        "outcome": 0.5,
        "missed": 0,
        "knowable": 1.0,  # the id echoed right; the failure has no knowable leaf (its message was not shown)
        "unknowable": 0.0,
        "value": 0.167,
    }
    assert parts["schema-only"]["outcome"] == 0.5
    assert parts["schema-only"]["knowable"] == 0.0  # blank strings are never the shown id
    assert parts["schema-only"]["value"] == 0.0
