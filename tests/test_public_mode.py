"""Public mode (a Space): every visitor is untrusted, every input hostile.

One test per cap and per refusal: pasted input size, number of tools, N, steps,
tokens, regular expressions; no visitor-supplied code runs and no visitor-chosen
connection is made (servers and engines come only from the operator's settings);
training and model switching are off; what a visitor is shown never holds server
paths, environment values or secrets.

Caps are checked twice: on ``RunRequest`` (what both the UI and the API go through)
and on the real app over ``gradio_client``, which bypasses every slider.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from pathlib import Path

import pytest

from conftest import call_text
from helpers import RuleBackend, free_port, serve
from envace_demo.engine import run_episode
from envace_demo.envs.registry import builtin_patterns
from envace_demo.errors import ConfigError, SchemaError, TaskError
from envace_demo.settings import PROJECT_ROOT, Settings
from envace_demo.ui.inputs import RunRequest, build_config, build_task
from envace_demo.ui.options import SECRET, SERVER_PATH, UIOptions

ROOT = Path(__file__).resolve().parents[1]
BANK_TOOLS = (ROOT / "examples" / "bank" / "tools.json").read_text(encoding="utf-8")
PROMPT = "What is the current balance of account ACC-1003?"
API_KEY = "sk-operator-0123456789abcdefSECRET"
BASE_URL = "http://10.20.30.40:8000/v1"
MCP = "python /srv/operator/private_server.py --token s3cr3t-value"
PUBLIC = Settings(
    public=True,
    max_new_tokens=128,
    max_steps=3,
    max_input_bytes=20_000,
    max_tools=8,
    api_key=API_KEY,
    mcp_servers=(MCP,),
)
OPTIONS = UIOptions.from_settings(PUBLIC)


def _tool(name: str, params: dict | None = None) -> dict:
    return {"name": name, "description": "d", "parameters": params or {"type": "object", "properties": {}}}


def _request(**changes) -> RunRequest:
    values = {
        "tools": BANK_TOOLS,
        "environment": "bank",
        "message": PROMPT,
        "mode": "parallel",
        "n": 1,
        "max_new_tokens": 64,
        "max_steps": 1,
    }
    return RunRequest(**{**values, **changes})


def _task(**changes):
    return build_task(_request(**changes).check(OPTIONS))


# ---- the setting -----------------------------------------------------------------------------


def test_public_mode_is_on_in_a_space_off_locally_and_a_setting_either_way():
    assert Settings.from_env({}).public is False
    assert Settings.from_env({"SPACE_ID": "team/demo"}).public is True
    assert Settings.from_env({"SPACE_ID": "team/demo", "ENVACE_PUBLIC": "0"}).public is False
    assert Settings.from_env({"ENVACE_PUBLIC": "1"}).public is True
    s = Settings.from_env({"ENVACE_MAX_INPUT_BYTES": "1000", "ENVACE_MAX_TOOLS": "2"})
    assert (s.max_input_bytes, s.max_tools) == (1000, 2)
    with pytest.raises(ConfigError):
        Settings(max_tools=0).checked()


def test_public_options_cap_everything_a_visitor_can_turn_up():
    o = OPTIONS
    assert (o.max_n, o.max_new_tokens, o.max_steps, o.max_suite_tasks) == (4, 128, 3, 8)
    assert (o.max_input_bytes, o.max_tools, o.max_message_bytes) == (20_000, 8, 4_096)
    assert not o.allow_model_switch and not o.allow_training and not o.allow_regex and o.public
    local = UIOptions.from_settings(Settings())
    assert local.allow_model_switch and local.allow_training and local.allow_regex and not local.public
    assert API_KEY not in repr(o) and MCP not in repr(o)  # options get logged too


# ---- each cap ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field, at_cap, over, message",
    [
        ("n", 4, 5, "n: expected an integer from 1 to 4, got 5"),
        ("max_new_tokens", 128, 129, "max_new_tokens: expected an integer from 16 to 128, got 129"),
        ("max_steps", 3, 4, "max_steps: expected an integer from 1 to 3, got 4"),
    ],
)
def test_n_tokens_and_steps_are_capped(field, at_cap, over, message):
    _request(**{field: at_cap}).check(OPTIONS)
    with pytest.raises(ConfigError) as err:
        _request(**{field: over}).check(OPTIONS)
    assert str(err.value) == message


@pytest.mark.parametrize("seed", [-1, 2**32, 1.5, float("nan"), float("inf")])
def test_the_seed_is_range_checked(seed):
    from envace_demo.ui.inputs import RunRequest

    values = ["[]", "none", PROMPT, "none", 1, 0.6, 0.95, 20, 64]
    with pytest.raises(ConfigError, match=r"^seed: expected an integer"):
        RunRequest.from_controls(*values, seed, True, 1).check(OPTIONS)
    assert RunRequest.from_controls(*values, 2**32 - 1.0, True, 1).check(OPTIONS).seed == 2**32 - 1
    assert RunRequest.from_controls(*values, None, True, 1).check(OPTIONS).seed is None


def test_the_message_size_is_capped():
    _request(message="x" * 4_096).check(OPTIONS)
    with pytest.raises(ConfigError, match="user message: 4,097 bytes, at most 4,096"):
        _request(message="x" * 4_097).check(OPTIONS)
    with pytest.raises(ConfigError, match="user message: 4,098 bytes"):
        _request(message="é" * 2_049).check(OPTIONS)  # bytes, not characters


def test_the_pasted_schema_size_is_capped():
    padded = json.dumps([_tool("f")]) + " " * (20_000 - len(json.dumps([_tool("f")])))
    assert _task(tools=padded, environment="none").tools[0].name == "f"
    with pytest.raises(SchemaError) as err:
        _task(tools=padded + " ", environment="none")
    assert (err.value.location, err.value.problem) == ("input", "too large: 20,001 bytes, at most 20,000")


def test_the_number_of_tools_is_capped():
    assert len(_task(tools=json.dumps([_tool(f"f{i}") for i in range(8)]), environment="none").tools) == 8
    with pytest.raises(SchemaError, match=r"^tools: 9 tools given, at most 8$"):
        _task(tools=json.dumps([_tool(f"f{i}") for i in range(9)]), environment="none")


def test_regular_expressions_from_visitors_are_refused_but_a_parameter_may_be_named_pattern():
    evil = _tool(
        "f", {"type": "object", "properties": {"s": {"anyOf": [{"type": "string", "pattern": "^(a+)+$"}]}}}
    )
    with pytest.raises(SchemaError) as err:
        _task(tools=json.dumps([evil]), environment="none")
    assert err.value.location == "tools[0].parameters.properties.s.anyOf[0].pattern"
    keyed = _tool("g", {"type": "object", "patternProperties": {"^x": {"type": "string"}}})
    with pytest.raises(SchemaError, match=r"tools\[0\]\.parameters\.patternProperties"):
        _task(tools=json.dumps([keyed]), environment="none")
    named = _tool("grep", {"type": "object", "properties": {"pattern": {"type": "string", "default": "a+"}}})
    assert _task(tools=json.dumps([named]), environment="none").tools[0].name == "grep"
    # Locally the operator's own schemas may use them.
    local = build_task(
        _request(tools=json.dumps([evil]), environment="none").check(UIOptions.from_settings(Settings()))
    )
    assert local.tools[0].parameters["properties"]["s"]["anyOf"][0]["pattern"] == "^(a+)+$"


def test_a_suite_upload_obeys_the_same_caps_as_a_pasted_schema(tmp_path):
    """Regression: the Compare upload went through the loaders with default limits and
    accepted 61 tools (cap 8 here) and a catastrophic pattern."""
    from envace_demo.ui.inputs import suite_tasks

    def upload(tools: list) -> str:
        f = tmp_path / f"{len(tools)}" / "upload.jsonl"
        f.parent.mkdir()
        f.write_text(json.dumps({"name": "t", "prompt": "p", "tools": tools}) + "\n")
        return str(f)

    many = upload([_tool(f"f{i}") for i in range(61)])
    with pytest.raises(TaskError, match=r"^upload.jsonl:1: tools: 61 tools given, at most 8$"):
        suite_tasks("upload", "bank", many, 4, OPTIONS.input_policy)
    evil = upload([_tool("f", {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}})])
    with pytest.raises(TaskError, match=r"upload.jsonl:1: tools\[0\]\.parameters\.properties\.s\.pattern: regular"):
        suite_tasks("upload", "bank", evil, 4, OPTIONS.input_policy)
    bfcl = tmp_path / "bfcl.jsonl"
    bfcl.write_text(json.dumps({"id": "simple_0", "question": [[{"role": "user", "content": "q"}]], "ground_truth": [],
                                "function": [_tool(f"g{i}") for i in range(9)]}) + "\n")
    with pytest.raises(TaskError, match="9 tools given, at most 8"):
        suite_tasks("upload", "bank", str(bfcl), 4, OPTIONS.input_policy)
    # The same files load for the operator, and the built-in schemas' own patterns are trusted.
    assert len(suite_tasks("upload", "bank", many, 4, UIOptions().input_policy)[0].task.tools) == 61
    assert OPTIONS.input_policy.trusted_patterns == builtin_patterns()


def test_every_loader_takes_the_policy_it_is_given(tmp_path):
    from envace_demo.tasks import load_task_file, task_from_record
    from envace_demo.train.data import task_set

    policy = OPTIONS.input_policy
    evil = [_tool("f", {"type": "object", "properties": {"s": {"type": "string", "pattern": "(x+x+)+y"}}})]
    with pytest.raises(TaskError, match="pattern: regular expressions are not accepted"):
        task_from_record({"name": "t", "prompt": "p", "tools": evil}, "a.jsonl:1", policy=policy)
    f = tmp_path / "t.jsonl"
    f.write_text(json.dumps({"name": "t", "prompt": "p", "check": {"calls": []}, "split": "heldout"}) + "\n")
    with pytest.raises(SchemaError, match="pattern: regular expressions are not accepted"):
        task_set(tasks_file=f, tools=evil, policy=policy)
    g = tmp_path / "evil.jsonl"
    g.write_text(json.dumps({"name": "t", "prompt": "p", "tools": evil}) + "\n")
    with pytest.raises(TaskError, match=r"^evil.jsonl:1: tools\[0\].*pattern: regular"):
        load_task_file(g, policy=policy)
    assert load_task_file(g)[0].tools[0].name == "f"  # the operator's own command line trusts its files


# ---- no visitor-chosen connection, no visitor-supplied code ---------------------------------------


@pytest.mark.parametrize(
    "where", [MCP, "http://127.0.0.1:8765/mcp", "python examples/mcp_server.py", "../bank"]
)
def test_an_environment_is_a_built_in_name_never_a_server_a_visitor_names(where):
    with pytest.raises(ConfigError) as err:
        _request(environment=where).check(OPTIONS)
    message = str(err.value)
    assert message.startswith("environment: expected one of bank, files, library, ")
    offered = message.split(", got ")[0]  # what the app offers (the rest echoes the request)
    assert "none" in offered and "s3cr3t" not in offered and "/srv/operator" not in offered


@pytest.fixture
def listener():
    """A loopback socket that records whether anything connected to it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.5)
    yield server
    server.close()


class Audit:
    """Python audit events seen while ``active``: code compiled or run, processes, connections."""

    WATCHED = (
        "exec",
        "compile",
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "subprocess.Popen",
        "socket.connect",
        "urllib.Request",
        "open",
    )

    def __init__(self):
        self.active = False
        self.events: list[tuple[str, str]] = []
        sys.addaudithook(self._hook)  # cannot be removed: it records only while active

    def _hook(self, event, args):
        if self.active and event.startswith(self.WATCHED):
            self.events.append((event, threading.current_thread().name, repr(args)[:200]))

    def __enter__(self):
        self.events = []
        self.active = True
        return self

    def __exit__(self, *exc):
        self.active = False


_AUDIT = Audit()


def test_hostile_schemas_and_model_output_run_no_code_and_open_nothing(scripted, listener):
    host, port = listener.getsockname()
    hostile = [
        {
            "name": "os.system",
            "description": "__import__('os').system('touch /tmp/envace-pwned')",
            "parameters": {
                "type": "object",
                "properties": {
                    "cmd": {"type": "string", "default": "{{ ''.__class__.__mro__[1].__subclasses__() }}"},
                    "remote": {"$ref": f"http://{host}:{port}/schema.json"},
                    "file": {"$ref": "file:///etc/passwd"},
                },
            },
        }
    ]
    with pytest.raises(SchemaError):  # a $ref is resolved inside the paste only; nothing is fetched
        _task(tools=json.dumps(hostile), environment="none")
    del hostile[0]["parameters"]["properties"]["remote"], hostile[0]["parameters"]["properties"]["file"]
    request = _request(tools=json.dumps(hostile), environment="none", mode="imagine", max_steps=1).check(
        OPTIONS
    )
    output = call_text("os_system", {"cmd": "__import__('os').system('id')"}, thinking="eval(input())")
    reply = '<execution_result>{"out": "{{7*7}} $(id) `id`"}</execution_result>'

    def episode():
        backend = scripted(actor=[output], rehearser=[reply])
        task = build_task(request)
        return run_episode(backend, task, build_config(request, PUBLIC, backend))

    episode()  # once unwatched: lazy imports compile code legitimately
    with _AUDIT as audit:
        eval("1 + 1")  # the watch works: this is seen
    assert [e[0] for e in audit.events] == ["compile", "exec"]
    with _AUDIT as audit:
        traj = episode()
    assert audit.events == []  # no code compiled or run, no process, no connection, no file opened
    step = traj.rehearsals[0].turns[0].calls[0]
    assert step.call.arguments == {"cmd": "__import__('os').system('id')"}  # data, kept as data
    assert step.rehearsed == {"out": "{{7*7}} $(id) `id`"}
    assert not Path("/tmp/envace-pwned").exists()
    with pytest.raises(OSError):  # nobody connected to the address the schema named
        listener.accept()


# ---- what visitors are shown -------------------------------------------------------------------------


def test_redact_hides_server_folders_secrets_and_operator_servers_in_public_mode_only():
    leaky = (
        f"OSError: {PROJECT_ROOT}/.cache/embedded/model.safetensors: cannot open; "
        f"key {API_KEY} refused by {BASE_URL.replace('10.20.30.40', 'x')}; "
        f"{MCP} exited; token hf_abcdefghijklmnopqrstuvwx; "
        f"{sys.prefix}/lib/python3.11/site-packages/torch/nn.py"
    )
    shown = OPTIONS.redact(leaky)
    for secret in (str(PROJECT_ROOT), API_KEY, MCP, "hf_abcdefghijklmnopqrstuvwx", sys.prefix, "s3cr3t"):
        assert secret not in shown
    assert shown.startswith(f"OSError: {SERVER_PATH}: cannot open; key {SECRET} refused by")
    assert "<MCP server> exited" in shown
    with_url = UIOptions.from_settings(PUBLIC.replace(base_url=BASE_URL))
    assert (
        with_url.redact(f"connection to {BASE_URL}/chat/completions failed")
        == "connection to <model server> failed"  # the whole URL on that server, whatever its path
    )
    record = {"ended": f"model_error: {API_KEY}", "steps": [{"error": f"{PROJECT_ROOT}/x"}], "n": 1}
    assert OPTIONS.redact(record) == {
        "ended": f"model_error: {SECRET}",
        "steps": [{"error": SERVER_PATH}],
        "n": 1,
    }
    # What the visitor wrote stays as written: a files-environment path, a short word.
    assert OPTIONS.redact("/notes/todo.txt none /tmpfile") == "/notes/todo.txt none /tmpfile"
    assert (
        UIOptions.from_settings(Settings(api_key=API_KEY)).redact(API_KEY) == API_KEY
    )  # not public: unchanged


def test_schema_errors_speak_of_the_paste_only():
    bad = BANK_TOOLS.replace('"type": "string"', '"type": "strng"', 1)
    with pytest.raises(SchemaError) as err:
        _task(tools=bad)
    assert str(PROJECT_ROOT) not in str(err.value) and "strng" in str(err.value)


# ---- the real app, public, over gradio_client ------------------------------------------------------------


@pytest.fixture(scope="module")
def public_app():
    from gradio_client import Client

    settings = PUBLIC.replace(model="rules", episode_seconds=5.0)
    backend = RuleBackend(secret_message=f"reading {PROJECT_ROOT}/.cache/weights with key {API_KEY}")
    with serve(settings, backend) as url:
        client = Client(url, verbose=False)
        yield client
        client.close()


def _refused(client, *args, api_name="/run", **kwargs) -> str:
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError) as err:
        client.predict(*args, api_name=api_name, **kwargs)
    return str(err.value)


def test_the_api_offers_no_way_to_name_a_server_a_model_or_code(public_app):
    api = public_app.view_api(return_format="dict", print_info=False)["named_endpoints"]
    assert set(api) == {"/run", "/compare", "/rehearse"}  # no model loading, no training, no upload of code
    expected = [
        "tools",
        "environment",
        "message",
        "n",
        "temperature",
        "top_p",
        "top_k",
        "max_new_tokens",
        "seed",
        "constrained",
        "max_steps",
    ]
    assert [p["parameter_name"] for p in api["/run"]["parameters"]] == expected[:3] + ["mode"] + expected[3:]
    assert [p["parameter_name"] for p in api["/compare"]["parameters"]] == expected[:3] + [
        "rehearsal_mode"
    ] + expected[3:]


def test_the_app_enforces_every_cap_whatever_the_client_sends(public_app):
    run = (BANK_TOOLS, "bank", PROMPT)
    assert "n: expected an integer from 1 to 4, got 5" in _refused(public_app, *run, "parallel", 5)
    assert "n: expected an integer from 1 to 4" in _refused(
        public_app, *run, "parallel", 9, api_name="/compare"
    )
    assert "max_new_tokens: expected an integer from 16 to 128" in _refused(
        public_app, *run, "none", max_new_tokens=4096
    )
    assert "max_steps: expected an integer from 1 to 3" in _refused(public_app, *run, "none", max_steps=50)
    assert "user message: 5,000 bytes, at most 4,096" in _refused(
        public_app, BANK_TOOLS, "bank", "x" * 5000, "none"
    )
    too_many = json.dumps([_tool(f"f{i}") for i in range(9)])
    assert "tools: 9 tools given, at most 8" in _refused(public_app, too_many, "none", PROMPT, "none")
    assert "input: too large" in _refused(public_app, " " * 20_001 + "[]", "none", PROMPT, "none")
    regex = json.dumps(
        [_tool("f", {"type": "object", "properties": {"s": {"type": "string", "pattern": "(a+)+$"}}})]
    )
    assert "regular expressions are not accepted" in _refused(public_app, regex, "none", PROMPT, "none")
    assert "environment: expected one of" in _refused(
        public_app, BANK_TOOLS, "http://127.0.0.1:9/mcp", PROMPT, "none"
    )
    assert "seed: expected an integer from 0 to 4294967295, got -1" in _refused(public_app, *run, "none", seed=-1)
    record = public_app.predict(*run, "none", api_name="/run")  # within the caps it runs
    assert record["ended"] == "answer" and record["success"] is True


def test_a_model_error_shown_to_a_visitor_holds_no_server_path_or_secret(public_app):
    record = public_app.predict(BANK_TOOLS, "bank", "EXPLODE now", "none", api_name="/run")
    assert record["ended"] == f"model_error: the model crashed reading {SERVER_PATH} with key {SECRET}"
    shown = json.dumps(record)
    assert str(PROJECT_ROOT) not in shown and API_KEY not in shown


def test_a_failing_tool_shown_to_a_visitor_holds_no_server_path_or_secret(scripted):
    from envace_demo.envs.registry import create

    request = _request(mode="none", max_steps=1).check(OPTIONS)
    backend = scripted(actor=[call_text("get_account", {"account_id": "ACC-1003"})])
    env = create("bank")

    def broken(name, args):
        raise OSError(f"{PROJECT_ROOT}/data/bank.db: locked (auth {API_KEY})")

    env.execute = broken
    traj = run_episode(backend, build_task(request), build_config(request, PUBLIC, backend), env)
    message = f"{SERVER_PATH}: locked (auth {SECRET})"
    step = traj.turns[0].calls[0]
    assert step.real["error"]["message"] == message and step.error.endswith(message)
    local = _request(mode="none", max_steps=1).check(UIOptions.from_settings(Settings()))
    assert build_config(local, Settings(), backend).redact is None  # locally the operator sees it all
    assert build_config(local, Settings(), backend).imagined_reads == "rehearse"  # every step's rehearsal shown


@pytest.fixture
def broken_model_app():
    """A public app whose model failed to load, with a server path and the key in the error."""
    from gradio_client import Client

    from envace_demo.ui import build_app
    from envace_demo.ui.holder import ModelHolder

    def fail(settings):
        raise OSError(f"{PROJECT_ROOT}/.cache/weights.safetensors: unreadable (token {API_KEY})")

    settings = PUBLIC.replace(model="rules")
    holder = ModelHolder(settings, loader=fail)
    holder.start()
    demo = build_app(settings, holder=holder)
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    client = Client(f"http://127.0.0.1:{port}/", verbose=False)
    try:
        yield client
    finally:
        client.close()
        demo.close()


def test_a_model_load_failure_shown_to_a_visitor_holds_no_server_path_or_secret(broken_model_app):
    message = _refused(broken_model_app, BANK_TOOLS, "bank", PROMPT, "none")
    assert "unreadable" in message
    assert str(PROJECT_ROOT) not in message and API_KEY not in message


def test_unexpected_exceptions_are_not_shown_verbatim_in_public_mode():
    from envace_demo.ui import launch_options

    assert launch_options(PUBLIC)["show_error"] is False
    assert launch_options(Settings())["show_error"] is True


def test_training_is_off_in_public_mode(public_app):
    """The Fine-tune tab is there to read about, but nothing in it can start or apply a run
    (and its events are private: no API client can call them either)."""
    by_id = {c["props"].get("elem_id"): c["props"] for c in public_app.config["components"]}
    assert by_id["train-button"]["interactive"] is False
    assert by_id["train-stop"]["interactive"] is False
    assert by_id["train-apply"]["interactive"] is False


# ---- the schema editor's status: the same loader and policy as Run, linear on any text ----


def test_the_editor_status_says_what_run_says_and_answers_hostile_text(public_app):
    from helpers import call_handler, handler_index

    url = public_app.src
    index = handler_index(url, ["schema-editor", "environment"], ["schema-status"])
    too_many = json.dumps([_tool(f"f{i}") for i in range(9)])
    status, body = call_handler(url, index, [too_many, "none"])
    assert status == 200 and "<code class=\"ev-loc\">tools</code><div>9 tools given, at most 8" in body["data"][0]
    assert "tools: 9 tools given, at most 8" in _refused(public_app, too_many, "none", PROMPT, "none")
    status, body = call_handler(url, index, [json.dumps([_tool(f"f{i}") for i in range(8)]), "none"])
    assert status == 200 and "8 tools" in body["data"][0]
    # The text that was quadratic (47 s at 64 KB): refused on its size here, at once.
    hostile = "[]" * 33 + '"' + '\\"' * 32_000
    status, body = call_handler(url, index, [hostile, "none"])
    assert status == 200 and "too large: 64,067 bytes, at most 20,000" in body["data"][0]
    status, body = call_handler(url, index, [hostile[:19_000], "none"])
    assert status == 200 and "invalid JSON at line 1, column 3" in body["data"][0]


# ---- every field of every uploaded task, and a suite's total work ------------------------------


def test_every_prompt_of_a_suite_upload_is_capped_not_only_the_first(tmp_path):
    """Regression: a JSONL whose first prompt was short and whose seven others were 1.2 MB each
    (9.4 MB, under the 10 MB file cap) was accepted."""
    from envace_demo.ui.inputs import suite_tasks

    f = tmp_path / "upload.jsonl"
    lines = [{"name": "t0", "prompt": "short", "env": "bank"}]
    lines += [{"name": f"t{i}", "prompt": "x" * 1_200_000, "env": "bank"} for i in range(1, 8)]
    f.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    assert f.stat().st_size > 8_000_000
    with pytest.raises(TaskError, match=r"^upload.jsonl:2: prompt: the prompt is 1,200,000 bytes, at most 4,096$"):
        suite_tasks("upload", "bank", str(f), 8, OPTIONS.input_policy)
    bfcl = tmp_path / "bfcl.jsonl"
    bfcl.write_text(json.dumps({"id": "b", "question": [[{"role": "user", "content": "q" * 5000}]],
                                "ground_truth": [], "function": [_tool("g")]}) + "\n")
    with pytest.raises(TaskError, match=r"^bfcl.jsonl:1: prompt: the prompt is 5,000 bytes, at most 4,096$"):
        suite_tasks("upload", "bank", str(bfcl), 8, OPTIONS.input_policy)
    # A check is plain JSON no larger than a tool list may be.
    big_check = tmp_path / "check.jsonl"
    big_check.write_text(json.dumps({"name": "t", "prompt": "p", "env": "bank",
                                     "check": {"answer_contains": ["a" * 30_000]}}) + "\n")
    with pytest.raises(TaskError, match=r"^check.jsonl:1: check: too large: at least 30,0\d\d bytes as JSON, at most 20,000$"):
        suite_tasks("upload", "bank", str(big_check), 8, OPTIONS.input_policy)
    assert len(suite_tasks("upload", "bank", str(big_check), 8, UIOptions().input_policy)) == 1


def test_prompts_are_capped_in_the_models_tokens_too():
    from envace_demo.errors import InputError
    from envace_demo.policy import InputPolicy
    from envace_demo.tasks import Task
    from envace_demo.ui.inputs import check_prompts

    class Tokens(RuleBackend):
        def count_tokens(self, text: str) -> int:
            return len(text.split())

    policy = InputPolicy(max_prompt_bytes=4_096, max_prompt_tokens=100)
    ok, wordy = Task("ok", "a b c", []), Task("wordy", "a " * 150, [])
    check_prompts([ok], policy, Tokens())
    with pytest.raises(InputError, match=r"^task 'wordy': prompt: the prompt is 150 tokens, at most 100$"):
        check_prompts([ok, wordy], policy, Tokens())
    assert OPTIONS.input_policy.max_prompt_tokens == 1_024 and UIOptions().input_policy.max_prompt_tokens is None


def test_a_suites_total_work_is_capped_in_public_mode():
    policy = OPTIONS.input_policy
    policy.check_work(8, 3, 1)
    with pytest.raises(ConfigError, match=r"^suite: 8 tasks x 3 seeds x 3 modes = 72 episodes, at most 24"):
        policy.check_work(8, 3, 3)
    UIOptions().input_policy.check_work(64, 10, 3)  # the operator's own runs: no cap


def test_public_uploads_are_bounded_cached_briefly_and_never_fetched_from_a_url():
    import asyncio

    import gradio as gr

    from envace_demo.ui import build_app, launch_options
    from envace_demo.ui.holder import ModelHolder

    assert launch_options(PUBLIC)["max_file_size"] == OPTIONS.input_policy.max_file_bytes == 10_000_000
    assert "max_file_size" not in launch_options(Settings())
    settings = PUBLIC.replace(model="rules")
    demo = build_app(settings, holder=ModelHolder(settings, loader=lambda s: RuleBackend()))
    assert demo.delete_cache == (3600, 3600)
    files = [b for b in demo.blocks.values() if isinstance(b, gr.File)]
    assert files
    for block in files:
        with pytest.raises(gr.Error, match="not a URL"):
            asyncio.run(block.async_move_resource_to_block_cache("http://169.254.169.254/latest/meta-data"))
