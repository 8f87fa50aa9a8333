"""Helpers shared by the tests (import them; fixtures live in ``conftest.py``).

- ``free_port``, ``LaunchedApp``: ``python app.py`` in a subprocess on 127.0.0.1;
- ``serve``: the app in this process with a given backend; ``RuleBackend``, a thread-safe
  scripted model for the app's fault and public-mode tests;
- ``ChatServer``, ``call_deltas``, ``text_deltas``: a scripted OpenAI-compatible chat server
  (the ``chat_server`` fixture starts them);
- ``front_matter``, ``pins``, ``space_install_args``: the Space's README front matter and
  its one install command;
- ``PacedBackend``: a scripted backend whose generations take the time a pace gives them
  (slow rehearsals, a slow committed rehearsal), for the engine's time budget;
- ``tiny_tokenizer``, ``tiny_random_backend``, ``teach_format``: a 2-layer random Llama
  (mechanics only, never quality) and the pick-a-letter tasks it is trained on.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import torch
from conftest import ScriptedBackend, call_text, result_text

from envace_demo.models.base import Backend, Generation, ModelInfo, Sampling
from envace_demo.prompts import CURRENT_TOOL, Conversation, actor_prompt, rehearser_messages, rehearser_prompt
from envace_demo.record import ToolCall
from envace_demo.schemas import load_tools
from envace_demo.tasks import Task
from envace_demo.train.config import TrainConfig

ROOT = Path(__file__).resolve().parents[1]

# What RuleBackend says: look up ACC-1003, predict its balance, answer.
BALANCE = call_text("get_account", {"account_id": "ACC-1003"})
ANSWER = "<think>done</think>\nThe balance of ACC-1003 is 310.25 USD."
PREDICTED = result_text({"account_id": "ACC-1003", "balance": 300.0})


def record_calls(record: dict) -> list[dict]:
    """The committed calls of an exported record, in order (each call sits in its turn)."""
    return [c for turn in record["turns"] for c in turn["calls"]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LaunchedApp:
    """``python app.py`` in a subprocess; ``url`` once it serves, timings measured."""

    def __init__(self, log_path: Path, extra_env: dict[str, str] | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.log_path = log_path
        env = {
            **os.environ,
            "GRADIO_SERVER_NAME": "127.0.0.1",
            "GRADIO_SERVER_PORT": str(self.port),
            "GRADIO_ANALYTICS_ENABLED": "False",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "ENVACE_MODEL": "embedded",
            "ENVACE_DEVICE": "cpu",
            "ENVACE_CACHE_DIR": str(ROOT / ".cache"),
            "ENVACE_MAX_NEW_TOKENS": "96",
            "ENVACE_MAX_STEPS": "1",
            # One thread: on a small shared CPU, two OpenMP threads fighting other work
            # made each decoding step many times slower.
            "OMP_NUM_THREADS": "1",
            **(extra_env or {}),
        }
        env.pop("SPACE_ID", None)
        self._log = open(log_path, "w")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "app.py"],
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.served_after = self._wait_served(timeout=240)
        self.model_ready_after: float | None = None

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def _wait_served(self, timeout: float) -> float:
        import urllib.request

        deadline = self.started + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"app.py exited with {self.proc.returncode}:\n{self.log()[-3000:]}")
            try:
                with urllib.request.urlopen(self.url, timeout=2) as response:
                    if response.status == 200:
                        return time.monotonic() - self.started
            except OSError:
                pass
            time.sleep(0.25)
        raise RuntimeError(f"app.py did not serve within {timeout} s:\n{self.log()[-3000:]}")

    def wait_model_ready(self, timeout: float = 300) -> float:
        """Seconds from launch until the app logged that the model is ready."""
        deadline = self.started + timeout
        while time.monotonic() < deadline:
            if "model ready:" in self.log():
                if self.model_ready_after is None:
                    self.model_ready_after = time.monotonic() - self.started
                return self.model_ready_after
            if "model failed to load" in self.log():
                raise RuntimeError(self.log()[-3000:])
            time.sleep(0.25)
        raise RuntimeError(f"the model was not ready within {timeout} s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()


class RuleBackend(Backend):
    """Answers by what the user asked: "EXPLODE" raises, "FOREVER" streams until stopped,
    anything else looks up ACC-1003 and answers. Thread-safe: sessions share it."""

    supports_constraints = False

    def __init__(self, secret_message: str = ""):
        self.secret_message = secret_message

    @property
    def info(self) -> ModelInfo:
        return ModelInfo(model_id="rules", device="cpu", dtype="none")

    def render(self, messages, tools=None, enable_thinking=True) -> str:
        return json.dumps({"messages": messages, "tools": tools}, ensure_ascii=False)

    def generate(self, prompt, sampling: Sampling, constraint=None, on_token=None, cancel=None):
        text = prompt.text
        if "EXPLODE" in text:
            raise RuntimeError(f"the model crashed {self.secret_message}".strip())
        if "FOREVER" in text:
            out = "<think>"
            while not (cancel is not None and cancel.is_set()):
                out += "hmm "
                if on_token:
                    on_token(0, out)
                time.sleep(0.01)
            return Generation(out, len(out), 10, 0.0, "cancelled")
        if CURRENT_TOOL in text:
            return Generation(PREDICTED, 8, 10, 0.01)
        return Generation(ANSWER if '"role": "tool"' in text else BALANCE, 8, 10, 0.01)


class PacedBackend(ScriptedBackend):
    """``ScriptedBackend`` whose every generation takes ``pace(prompt_text, committing)``
    seconds (honouring cancel), where ``committing`` turns true at the first prompt that
    carries the rehearsal memory (the committed run's first actor turn) and stays so."""

    def __init__(self, actor=(), rehearser=(), pace=lambda text, committing: 0.0):
        super().__init__(actor, rehearser)
        self.pace = pace
        self.committing = False

    def generate(self, prompt, sampling, constraint=None, on_token=None, cancel=None):
        self.committing = self.committing or "Rehearsal memory" in prompt.text
        self.delay = self.pace(prompt.text, self.committing)
        return super().generate(prompt, sampling, constraint, on_token, cancel)


@contextmanager
def serve(settings, backend, **launch):
    """The real app in this process on a loopback port, ``backend`` as its model; yields its URL.
    ``launch``: more ``demo.launch`` options (``mcp_server=True``)."""
    from envace_demo.ui import build_app
    from envace_demo.ui.holder import ModelHolder

    holder = ModelHolder(settings, loader=lambda s: backend)
    holder.start()
    holder.wait(timeout=30)
    demo = build_app(settings, holder=holder)
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, **launch)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        demo.close()


TOOLS_JSON = [
    {
        "name": "pick",
        "description": "Pick a letter.",
        "parameters": {
            "type": "object",
            "properties": {"choice": {"type": "string", "enum": ["a", "b"]}},
            "required": ["choice"],
        },
        "response": {
            "type": "object",
            "properties": {"picked": {"type": "string", "enum": ["a", "b"]}},
            "required": ["picked"],
        },
    }
]
TOOLS = load_tools(TOOLS_JSON)


def task(name: str, letter: str, split: str = "train") -> Task:
    return Task(
        name=name,
        prompt=f"pick {letter}",
        tools=TOOLS,
        check={"includes_calls": [{"pick": {"choice": [letter]}}]},
        split=split,
    )


TRAIN = [task("t-a", "a"), task("t-b", "b")]
HELDOUT = [task("h-a", "a", "heldout")]
CONFIG = TrainConfig(
    steps=2,
    group_size=4,
    prompts_per_step=2,
    lr=5e-2,
    max_new_tokens=40,
    micro_batch=4,
    eval_samples=1,
    eval_rehearsals=1,
)


def tiny_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from envace_demo.models.embedded import qwen3_chat_template

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = [
        '<tool_call>\n{"name": "pick", "arguments": {"choice": "a"}}\n</tool_call>',
        "<execution_result>",
    ] * 20
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = qwen3_chat_template()
    return fast


def teach_format(model, tokenizer, backend) -> None:
    """A few SFT steps on one prompt: calls pick "a" or "b" evenly, results echo the choice."""
    t = TRAIN[0]
    examples = []
    prompt = actor_prompt(backend, Conversation(t.prompt), t.tools).text
    for letter in "ab":
        call = ToolCall("pick", {"choice": letter})
        text = f'<tool_call>\n{{"name": "pick", "arguments": {{"choice": "{letter}"}}}}\n</tool_call>'
        examples.append((prompt, text))
        messages = rehearser_messages(t.tools, [], Conversation(t.prompt), text, call, t.tools[0])
        examples.append(
            (
                rehearser_prompt(backend, messages).text,
                f'<execution_result>\n{{"picked": "{letter}"}}\n</execution_result>',
            )
        )
    encoded = []
    for prompt, completion in examples:
        p = tokenizer(prompt, add_special_tokens=False).input_ids
        c = tokenizer(completion, add_special_tokens=False).input_ids + [tokenizer.eos_token_id]
        encoded.append((torch.tensor([p + c]), torch.tensor([[-100] * len(p) + c])))  # loss on the completion
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-2)
    model.train()
    for _ in range(25):
        for ids, labels in encoded:
            model(input_ids=ids, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()


def tiny_llama(vocab_size: int, hidden_size: int = 64, heads: int = 4, kv_heads: int = 2, layers: int = 2, **config):
    """A random Llama of 2 layers (or ``layers``) for mechanics only, never quality, seeded:
    the one tiny-model builder."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(
        LlamaConfig(
            vocab_size=vocab_size,
            hidden_size=hidden_size,
            intermediate_size=2 * hidden_size,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=kv_heads,
            **config,
        )
    )


def tiny_backend_over(tokenizer, constrained: bool = False, **config):
    """``tiny_llama`` behind a TransformersBackend with ``tokenizer``."""
    from envace_demo.models.transformers_backend import TransformersBackend

    model = tiny_llama(
        len(tokenizer), eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, **config
    )
    return TransformersBackend(model, tokenizer, model_id="tiny-random", constrained=constrained)


def tiny_random_backend():
    """The tiny model over the tiny tokenizer, constrained decoding on."""
    return tiny_backend_over(tiny_tokenizer(), constrained=True)


# What the official client may send; the scripted server refuses anything else (422).
STANDARD = {"model", "messages", "tools", "temperature", "top_p", "max_tokens", "stream", "stream_options", "seed"}


class ChatServer:
    """``reply(body) -> list`` of stream items: a delta dict (``{"content": ...}``,
    ``{"reasoning_content": ...}``, ``{"tool_calls": [...]}``), ``{"finish": reason}``,
    ``{"usage": (prompt, completion)}``, ``{"sleep": s}``, or ``{"status": code}``."""

    def __init__(self, reply, models=("served-model",), strict=True):
        self.reply, self.models, self.strict = reply, list(models), strict
        self.requests: list[dict] = []
        self.disconnected = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _json(self, code, value):
                data = json.dumps(value).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._json(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in server.models]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                unexpected = set(body) - STANDARD
                if server.strict and unexpected:
                    return self._json(422, {"detail": f"Unexpected fields in the request: {sorted(unexpected)}"})
                items = server.reply(body)
                if items and "status" in items[0]:
                    return self._json(items[0]["status"], {"detail": "scripted failure"})
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                try:
                    for item in items:
                        if "sleep" in item:
                            time.sleep(item["sleep"])
                            continue
                        self._event(item, body["model"])
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    server.disconnected.set()

            def _event(self, item, model):
                chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": model, "choices": []}
                if "usage" in item:
                    p, c = item["usage"]
                    chunk["usage"] = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
                else:
                    finish = item.get("finish")
                    delta = {} if finish else item
                    chunk["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def call_deltas(name, arguments, reasoning="I should look it up."):
    args = json.dumps(arguments)
    half = len(args) // 2
    return [
        {"reasoning_content": reasoning[:5]},
        {"reasoning_content": reasoning[5:]},
        {"tool_calls": [{"index": 0, "id": "x1", "type": "function", "function": {"name": name, "arguments": args[:half]}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": args[half:]}}]},
        {"finish": "tool_calls"},
        {"usage": (120, 17)},
    ]


def text_deltas(text, finish="stop"):
    return [{"content": text[: len(text) // 2]}, {"content": text[len(text) // 2 :]}, {"finish": finish}]


# ---- a Hugging Face Space: what it installs -------------------------------------------------

# What a gradio Space adds to requirements.txt in its one install command.
SPACE_EXTRAS = ['"gradio[oauth,mcp]=={sdk}"', '"uvicorn>=0.14.0"', '"websockets>=10.4"', "spaces"]
# ZeroGPU's supported versions (Python, torch).
ZEROGPU_PYTHON = {"3.10", "3.12"}
ZEROGPU_TORCH = {"2.8.0", "2.9.1", "2.10.0", "2.11.0"}


def front_matter() -> dict[str, str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.match(r"---\n(.*?)\n---\n", text, re.S)
    assert match, "README.md has no front matter"
    return {
        key.strip(): value.strip().strip('"')
        for key, _, value in (line.partition(":") for line in match.group(1).splitlines())
        if value.strip()
    }


def pins() -> dict[str, str]:
    found = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].split(";")[0].strip()
        if "==" in line:
            name, _, version = line.partition("==")
            found[name.strip().lower()] = version.strip()
    return found


def space_install_args() -> list[str]:
    sdk = front_matter()["sdk_version"]
    return ["-r", str(ROOT / "requirements.txt"), *(e.strip('"').format(sdk=sdk) for e in SPACE_EXTRAS)]


def handler_index(url: str, inputs: list[str], outputs: list[str]) -> int:
    """The fn_index of the app's event whose inputs and outputs are exactly the components of
    these elem_ids: how a page (or anybody) calls a handler the API does not list."""
    import urllib.request

    with urllib.request.urlopen(url.rstrip("/") + "/config", timeout=30) as resp:
        config = json.load(resp)
    ids = {c["id"]: c.get("props", {}).get("elem_id") for c in config["components"]}
    for index, dep in enumerate(config["dependencies"]):
        if [ids.get(i) for i in dep["inputs"]] == inputs and [ids.get(o) for o in dep["outputs"]] == outputs:
            return index
    raise LookupError(f"no event from {inputs} to {outputs}")


def call_handler(
    url: str, fn_index: int, data: list, timeout: float = 60, session_hash: str = "test-handler"
) -> tuple[int, dict]:
    """POST one call of an unqueued handler by fn_index, as plain HTTP: (status, JSON body)."""
    import urllib.error
    import urllib.request

    body = json.dumps({"fn_index": fn_index, "data": data, "session_hash": session_hash}).encode()
    req = urllib.request.Request(
        url.rstrip("/") + "/gradio_api/run/predict", data=body, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


def event_index(url: str, api_name: str) -> int:
    """The fn_index of the app's first event named ``api_name`` (a private handler is named
    after its function: ``on_model``, ``on_manual``)."""
    import urllib.request

    with urllib.request.urlopen(url.rstrip("/") + "/config", timeout=30) as resp:
        config = json.load(resp)
    for index, dep in enumerate(config["dependencies"]):
        if dep.get("api_name") == api_name:
            return index
    raise LookupError(f"no event named {api_name}")


class QueuedCall:
    """One queued call by fn_index over plain HTTP, as a page makes it: it joins the queue,
    then reads its event stream; ``close()`` drops the connection (a tab closed).
    ``refused``: the queue's answer when it would not take the job (HTTP status, detail)."""

    def __init__(self, url: str, fn_index: int, data: list, session_hash: str, headers: dict | None = None):
        import http.client
        from urllib.parse import urlparse

        self.session_hash = session_hash
        where = urlparse(url)
        self._host, self._port = where.hostname, where.port
        join = http.client.HTTPConnection(self._host, self._port, timeout=30)
        body = json.dumps({"data": data, "fn_index": fn_index, "session_hash": session_hash,
                           "event_data": None, "trigger_id": None})
        join.request("POST", "/gradio_api/queue/join", body, {"Content-Type": "application/json", **(headers or {})})
        answer = join.getresponse()
        payload = json.loads(answer.read() or b"{}")
        join.close()
        self.refused: tuple[int, str] | None = None
        self.messages: list[dict] = []
        self._stream = None
        if answer.status != 200:
            self.refused = (answer.status, payload.get("detail", ""))
            return
        self._stream = http.client.HTTPConnection(self._host, self._port, timeout=120)
        self._stream.request("GET", f"/gradio_api/queue/data?session_hash={session_hash}")
        self._sock = self._stream.sock
        self._response = self._stream.getresponse()

    def next_message(self) -> dict | None:
        """The next message of the stream (None once it ends)."""
        while True:
            line = self._response.readline()
            if not line:
                return None
            if line.startswith(b"data: "):
                message = json.loads(line[6:])
                self.messages.append(message)
                return message

    def wait_for(self, predicate, what: str = "a message") -> dict:
        while (message := self.next_message()) is not None:
            if predicate(message):
                return message
        raise AssertionError(f"the stream ended before {what}: {self.messages[-3:]}")

    def completed(self) -> dict:
        """The completed message (``success``, ``output``)."""
        return self.wait_for(lambda m: m.get("msg") == "process_completed", "the job completed")

    def result(self) -> dict:
        """The completed message's output."""
        return self.completed()["output"]

    def close(self) -> None:
        if self._stream is not None:
            self._sock.shutdown(socket.SHUT_RDWR)
            self._response.close()
            self._stream.close()
