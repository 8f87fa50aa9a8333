"""The BFCL-compatible checker (envace_demo.bfcl), on real BFCL records and on
targeted mismatches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envace_demo.bfcl import (
    CheckResult,
    check_calls,
    load_bfcl_record,
    match_call,
    normalize_string,
    reference_calls,
    safe_name,
)
from envace_demo.errors import SchemaError, TaskError
from envace_demo.record import ToolCall
from envace_demo.schemas import Tool, load_tools

ROOT = Path(__file__).resolve().parents[1]


def _bfcl_dir() -> Path | None:
    # The vendored slice when present, else the shared full set (absent in CI).
    for folder in (ROOT / "tests" / "data" / "bfcl", ROOT.parent / "shared" / "data" / "bfcl"):
        if folder.is_dir() and any(folder.glob("bfcl_*.jsonl")):
            return folder
    return None


BFCL_DIR = _bfcl_dir()
BFCL_FILES = sorted(BFCL_DIR.glob("bfcl_*.jsonl")) if BFCL_DIR else []


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _raw_tools(functions: list[dict]) -> list[Tool]:
    """Tools that keep BFCL's own dialect (dict/float/tuple/any) as their parameters."""
    return [
        Tool(name=safe_name(f["name"]), original_name=f["name"], description="", parameters=f["parameters"])
        for f in functions
    ]


# ----------------------------------------------------------------------------- every record


@pytest.mark.skipif(not BFCL_FILES, reason="no BFCL data (tests/data/bfcl or ../shared/data/bfcl)")
@pytest.mark.parametrize("path", BFCL_FILES, ids=lambda p: p.stem)
def test_ground_truth_passes_against_itself(path):
    failures, loaded = [], 0
    for raw in _records(path):
        record = load_bfcl_record(raw)
        variants = {"no-schema": None, "bfcl-dialect": _raw_tools(record["function"])}
        try:
            variants["load_tools"] = load_tools(record["function"])
            loaded += 1
        except SchemaError:
            pass  # the loader's own tests judge that; the other variants still run
        for label, tools in variants.items():
            calls = reference_calls(record["ground_truth"], tools)
            if record["ground_truth"]:
                assert calls, record["id"]
            result = check_calls(calls, record["ground_truth"], tools)
            if not result.ok:
                failures.append(f"{record['id']} [{label}]: {result.reason}")
    assert not failures, "\n".join(failures[:20])
    assert loaded > 0


@pytest.mark.skipif(not BFCL_FILES, reason="no BFCL data")
def test_real_records_reject_a_perturbed_answer():
    # One wrong value per record must fail: the self-check above is not vacuous.
    checked = 0
    for path in BFCL_FILES:
        for raw in _records(path):
            record = load_bfcl_record(raw)
            tools = _raw_tools(record["function"])
            calls = reference_calls(record["ground_truth"], tools)
            target = next((c for c in calls if c.arguments), None)
            if target is None:
                continue
            param = next(iter(target.arguments))
            target.arguments[param] = {"surely": "wrong"}
            result = check_calls(calls, record["ground_truth"], tools)
            assert not result.ok, record["id"]
            assert param in result.reason
            checked += 1
    assert checked > 0


# ----------------------------------------------------------------------------- fixtures


TRIANGLE = {
    "name": "calculate_triangle_area",
    "description": "Area of a triangle.",
    "parameters": {
        "type": "dict",
        "properties": {
            "base": {"type": "integer"},
            "height": {"type": "integer"},
            "unit": {"type": "string"},
        },
        "required": ["base", "height"],
    },
}
TRIANGLE_GT = [{"calculate_triangle_area": {"base": [10], "height": [5], "unit": ["units", ""]}}]

SPOTIFY = {
    "name": "spotify.play",
    "description": "Play an artist.",
    "parameters": {
        "type": "dict",
        "properties": {"artist": {"type": "string"}, "duration": {"type": "integer"}},
        "required": ["artist", "duration"],
    },
}
SPOTIFY_GT = [
    {"spotify.play": {"artist": ["Taylor Swift"], "duration": [20]}},
    {"spotify.play": {"artist": ["Maroon 5"], "duration": [15]}},
]

MIXED = {
    "name": "mixed",
    "description": "Every kind of parameter.",
    "parameters": {
        "type": "dict",
        "properties": {
            "ratio": {"type": "float"},
            "flag": {"type": "boolean"},
            "names": {"type": "array", "items": {"type": "string"}},
            "counts": {"type": "array", "items": {"type": "integer"}},
            "point": {"type": "tuple", "items": {"type": "float"}},
            "body": {
                "type": "dict",
                "properties": {"mode": {"type": "string"}, "temp": {"type": "integer"}},
            },
            "rows": {
                "type": "array",
                "items": {
                    "type": "dict",
                    "properties": {"field": {"type": "string"}, "value": {"type": "string"}},
                },
            },
        },
        "required": [],
    },
}


def mixed_gt(**params) -> list[dict]:
    return [{"mixed": params}]


@pytest.fixture(scope="module")
def triangle() -> list[Tool]:
    return load_tools([TRIANGLE])


@pytest.fixture(scope="module")
def spotify() -> list[Tool]:
    return load_tools([SPOTIFY])


@pytest.fixture(scope="module")
def mixed() -> list[Tool]:
    return load_tools([MIXED])


def tri(**arguments) -> list[ToolCall]:
    return [ToolCall("calculate_triangle_area", arguments)]


# ----------------------------------------------------------------------------- types


def test_exact_answer_passes(triangle):
    assert check_calls(tri(base=10, height=5), TRIANGLE_GT, triangle) == CheckResult(True, "")
    assert check_calls(tri(base=10, height=5, unit="units"), TRIANGLE_GT, triangle).ok


def test_float_for_integer_fails(triangle):
    result = check_calls(tri(base=10.0, height=5), TRIANGLE_GT, triangle)
    assert not result.ok
    assert result.reason.startswith("call 1 (calculate_triangle_area): base:")
    assert "integer" in result.reason and "10.0" in result.reason


def test_float_for_integer_fails_without_schema():
    result = check_calls(tri(base=10.0, height=5), TRIANGLE_GT)
    assert not result.ok and "base" in result.reason


def test_string_for_number_fails(triangle, mixed):
    assert not check_calls(tri(base="10", height=5), TRIANGLE_GT, triangle).ok
    assert not check_calls([ToolCall("mixed", {"ratio": "0.5"})], mixed_gt(ratio=[0.5]), mixed).ok


def test_bool_is_never_an_integer(triangle):
    gt = [{"calculate_triangle_area": {"base": [1], "height": [5]}}]
    result = check_calls(tri(base=True, height=5), gt, triangle)
    assert not result.ok and "boolean" in result.reason
    assert not check_calls(tri(base=True, height=5), gt).ok  # without schema too


def test_integer_for_float_passes(mixed):
    assert check_calls([ToolCall("mixed", {"ratio": 2})], mixed_gt(ratio=[2.0]), mixed).ok
    assert check_calls([ToolCall("mixed", {"ratio": 2})], mixed_gt(ratio=[2.0])).ok  # inferred float
    assert check_calls([ToolCall("mixed", {"point": [46, 1.5]})], mixed_gt(point=[[46.0, 1.5]]), mixed).ok


def test_number_for_boolean_fails(mixed):
    assert not check_calls([ToolCall("mixed", {"flag": 1})], mixed_gt(flag=[True]), mixed).ok
    assert check_calls([ToolCall("mixed", {"flag": True})], mixed_gt(flag=[True]), mixed).ok


def test_tuple_counts_as_list(mixed):
    assert check_calls([ToolCall("mixed", {"point": (46.6, 1.9)})], mixed_gt(point=[[46.6, 1.9]]), mixed).ok


def test_array_element_types(mixed):
    assert not check_calls([ToolCall("mixed", {"counts": [1.0, 2]})], mixed_gt(counts=[[1, 2]]), mixed).ok
    assert not check_calls([ToolCall("mixed", {"counts": ["1", 2]})], mixed_gt(counts=[[1, 2]]), mixed).ok


def test_variable_answer_type_is_accepted(mixed):
    # BFCL writes some answers as variables: a string where the schema wants an array.
    gt = mixed_gt(counts=["data['sales']"])
    assert check_calls([ToolCall("mixed", {"counts": "data['sales']"})], gt, mixed).ok
    assert not check_calls([ToolCall("mixed", {"counts": "data['cost']"})], gt, mixed).ok


# ----------------------------------------------------------------------------- values


@pytest.mark.parametrize(
    "given, allowed",
    [
        ("April 1, 2024", "april 1 2024"),
        ("New York, NY", "new-york ny"),
        ("it's", 'it"s'),
        ("a_b*c^d/e.f", "ABCDEF"),
        ("  units ", "Units"),
    ],
)
def test_string_normalization_equalities(triangle, given, allowed):
    assert normalize_string(given) == normalize_string(allowed)
    gt = [{"calculate_triangle_area": {"base": [10], "height": [5], "unit": [allowed]}}]
    assert check_calls(tri(base=10, height=5, unit=given), gt, triangle).ok


def test_different_strings_fail(triangle):
    gt = [{"calculate_triangle_area": {"base": [10], "height": [5], "unit": ["meters"]}}]
    result = check_calls(tri(base=10, height=5, unit="feet"), gt, triangle)
    assert not result.ok and "unit" in result.reason and "feet" in result.reason


def test_lists_compare_in_order_with_string_rules(mixed):
    gt = mixed_gt(names=[["New York", "Los Angeles"]])
    assert check_calls([ToolCall("mixed", {"names": ["new york", "los-angeles"]})], gt, mixed).ok
    assert not check_calls([ToolCall("mixed", {"names": ["Los Angeles", "New York"]})], gt, mixed).ok
    assert not check_calls([ToolCall("mixed", {"names": ["New York"]})], gt, mixed).ok


def test_any_allowed_value_passes(triangle):
    gt = [{"calculate_triangle_area": {"base": [10, 12], "height": [5]}}]
    assert check_calls(tri(base=12, height=5), gt, triangle).ok
    assert not check_calls(tri(base=11, height=5), gt, triangle).ok


def test_dict_values_key_by_key(mixed):
    gt = mixed_gt(body=[{"mode": ["COOL"], "temp": ["", 22]}])
    assert check_calls([ToolCall("mixed", {"body": {"mode": "cool"}})], gt, mixed).ok  # temp optional
    assert check_calls([ToolCall("mixed", {"body": {"mode": "COOL", "temp": 22}})], gt, mixed).ok
    wrong = check_calls([ToolCall("mixed", {"body": {"mode": "COOL", "temp": 23}})], gt, mixed)
    assert not wrong.ok and "temp" in wrong.reason
    extra = check_calls([ToolCall("mixed", {"body": {"mode": "COOL", "fan": "HIGH"}})], gt, mixed)
    assert not extra.ok and "fan" in extra.reason
    missing = check_calls([ToolCall("mixed", {"body": {"temp": 22}})], gt, mixed)
    assert not missing.ok and "mode" in missing.reason


def test_list_of_dicts(mixed):
    gt = mixed_gt(rows=[[{"field": ["age"], "value": ["25"]}, {"field": ["job"], "value": ["engineer"]}]])
    good = [{"field": "age", "value": "25"}, {"field": "Job", "value": "engineer"}]
    assert check_calls([ToolCall("mixed", {"rows": good})], gt, mixed).ok
    assert not check_calls([ToolCall("mixed", {"rows": good[::-1]})], gt, mixed).ok
    assert not check_calls([ToolCall("mixed", {"rows": good[:1]})], gt, mixed).ok


# ----------------------------------------------------------------------------- parameters


def test_missing_required_fails(triangle):
    # height allows "" here, yet the schema requires it.
    gt = [{"calculate_triangle_area": {"base": [10], "height": [5, ""]}}]
    result = check_calls(tri(base=10), gt, triangle)
    assert not result.ok and "required" in result.reason and "height" in result.reason


def test_missing_parameter_without_empty_marker_fails(triangle):
    gt = [{"calculate_triangle_area": {"base": [10], "height": [5], "unit": ["cm"]}}]
    result = check_calls(tri(base=10, height=5), gt, triangle)
    assert not result.ok and "unit" in result.reason


def test_extra_parameter_fails(triangle):
    not_in_schema = check_calls(tri(base=10, height=5, color="red"), TRIANGLE_GT, triangle)
    assert not not_in_schema.ok and "color" in not_in_schema.reason
    gt_without_unit = [{"calculate_triangle_area": {"base": [10], "height": [5]}}]
    not_in_answer = check_calls(tri(base=10, height=5, unit="units"), gt_without_unit, triangle)
    assert not not_in_answer.ok and "unit" in not_in_answer.reason


def test_empty_string_for_optional_string_passes_as_in_bfcl(triangle):
    # BFCL normalizes the given "" and finds it among the allowed values.
    assert check_calls(tri(base=10, height=5, unit=""), TRIANGLE_GT, triangle).ok


# ----------------------------------------------------------------------------- calls


def test_safe_and_original_names_match(spotify):
    gt = SPOTIFY_GT[:1]
    args = {"artist": "Taylor Swift", "duration": 20}
    assert check_calls([ToolCall("spotify_play", args)], gt, spotify).ok
    assert check_calls([ToolCall("spotify.play", args)], gt, spotify).ok
    wrong = check_calls([ToolCall("spotify_pause", args)], gt, spotify)
    assert not wrong.ok and "spotify.play" in wrong.reason


def test_parallel_any_order(spotify):
    swift = ToolCall("spotify_play", {"artist": "Taylor Swift", "duration": 20})
    maroon = ToolCall("spotify_play", {"artist": "Maroon 5", "duration": 15})
    assert check_calls([swift, maroon], SPOTIFY_GT, spotify).ok
    assert check_calls([maroon, swift], SPOTIFY_GT, spotify).ok


def test_parallel_each_call_used_once(spotify):
    swift = ToolCall("spotify_play", {"artist": "Taylor Swift", "duration": 20})
    result = check_calls([swift, swift], SPOTIFY_GT, spotify)
    assert not result.ok and "expected call 2 (spotify.play)" in result.reason and "call 2" in result.reason


def test_wrong_count_fails(spotify):
    swift = ToolCall("spotify_play", {"artist": "Taylor Swift", "duration": 20})
    result = check_calls([swift], SPOTIFY_GT, spotify)
    assert not result.ok and "expected 2 call(s), got 1" == result.reason
    assert not check_calls([], SPOTIFY_GT, spotify).ok


def test_irrelevance():
    assert check_calls([], []).ok
    result = check_calls([ToolCall("math_sum", {"numbers": [1]})], [])
    assert not result.ok and "math_sum" in result.reason


def test_match_call_directly():
    params = load_tools([TRIANGLE])[0].parameters
    expected = TRIANGLE_GT[0]
    assert match_call("calculate_triangle_area", {"base": 10, "height": 5}, expected, params).ok
    result = match_call("calculate_triangle_area", {"base": 10.0, "height": 5}, expected, params)
    assert not result.ok and result.reason.startswith("base:")
    with pytest.raises(TaskError):
        match_call("x", {}, {"a": {}, "b": {}}, None)


def test_reference_calls_use_safe_names_and_skip_optional(spotify, triangle):
    assert reference_calls(SPOTIFY_GT, spotify)[0] == ToolCall(
        "spotify_play", {"artist": "Taylor Swift", "duration": 20}
    )
    assert reference_calls(TRIANGLE_GT, triangle)[0].arguments == {"base": 10, "height": 5, "unit": "units"}
    gt = [{"calculate_triangle_area": {"base": [10], "height": [5], "unit": ["", "cm"]}}]
    assert reference_calls(gt)[0].arguments == {"base": 10, "height": 5, "unit": "cm"}


# ----------------------------------------------------------------------------- records


def test_load_bfcl_record():
    raw = {
        "id": "simple_python_0",
        "category": "simple_python",
        "question": [
            [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Area of 10 by 5?"}]
        ],
        "function": [TRIANGLE],
        "ground_truth": TRIANGLE_GT,
    }
    record = load_bfcl_record(raw)
    assert record["id"] == "simple_python_0" and record["category"] == "simple_python"
    assert record["prompt"] == "Area of 10 by 5?"
    assert [m["role"] for m in record["messages"]] == ["system", "user"]
    assert record["function"] == [TRIANGLE] and record["ground_truth"] == TRIANGLE_GT


@pytest.mark.parametrize(
    "patch, fragment",
    [
        ({"question": "hi"}, "question"),
        ({"question": [[{"role": "assistant", "content": "x"}]]}, "no user message"),
        ({"ground_truth": [{"a": {}, "b": {}}]}, "ground_truth[0]"),
        ({"function": None}, "function"),
    ],
)
def test_load_bfcl_record_errors(patch, fragment):
    raw = {"id": "r1", "question": [[{"role": "user", "content": "q"}]], "function": [], "ground_truth": []}
    with pytest.raises(TaskError) as err:
        load_bfcl_record({**raw, **patch})
    assert fragment in str(err.value) and "r1" in str(err.value)
