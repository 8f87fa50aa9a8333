"""An attacker for ``bench.load``: one visitor sending hostile inputs while others use the app.

Round after round, until told to stop, over plain HTTP as any client can (``fn_index`` where
the UI has no API):

- ``status``: each ``bench.hostile`` family (64 KB and 1 MB) to the schema editor's status
  handler, which runs outside the queue;
- ``run``: ``/run`` with a hostile schema (64 KB), through the queue;
- ``suite``: an uploaded JSONL of 8 tasks whose later prompts are 1.2 MB each, to the suite's
  estimate (outside the queue) and to Run suite (queued), 3 seeds x 3 modes.

Each answer is read whole and searched for the app's secrets (``canaries``): one seen is a
leak. An answer the app should have given and did not (a status handler's HTTP error, a
lost connection) is an error; refusals are the expected answers.
"""

from __future__ import annotations

import http.client
import json
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from bench.hostile import families

SIZES = (65_536, 1_000_000)
SUITE_MODES = ["none", "parallel", "sequential"]


@dataclass
class AttackReport:
    rounds: int = 0
    sent: dict[str, int] = field(default_factory=dict)
    slowest_s: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)

    def note(self, kind: str, seconds: float) -> None:
        self.sent[kind] = self.sent.get(kind, 0) + 1
        self.slowest_s[kind] = round(max(self.slowest_s.get(kind, 0.0), seconds), 3)

    def to_dict(self) -> dict:
        return {"rounds": self.rounds, "sent": self.sent, "slowest_s": self.slowest_s,
                "errors": len(self.errors), "leaks": len(self.leaks),
                "error_samples": self.errors[:5], "leak_samples": self.leaks[:5]}


class Attacker:
    """Runs on a thread of its own until ``stop`` is set; ``report`` says what it saw."""

    def __init__(self, url: str, canaries: tuple[str, ...], tools: str):
        where = urlparse(url)
        self.host, self.port = where.hostname, where.port
        self.canaries, self.tools = canaries, tools
        self.session = "attacker-" + uuid.uuid4().hex[:8]
        self.report = AttackReport()
        self.stop = threading.Event()
        self.texts = {f"{name}@{size}": text for size in SIZES for name, text in families(size).items()}
        self._config = self._get("/config")
        self._tmp = tempfile.TemporaryDirectory(prefix="envace-attack-")
        self.suite_file = self._suite_file(Path(self._tmp.name) / "suite.jsonl")

    # ---- plumbing ---------------------------------------------------------------------------

    def _connection(self, timeout: float = 600) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def _get(self, path: str) -> dict:
        conn = self._connection()
        conn.request("GET", path)
        body = conn.getresponse().read()
        conn.close()
        return json.loads(body)

    def _post(self, path: str, payload: bytes, headers: dict) -> tuple[int, str]:
        conn = self._connection()
        conn.request("POST", path, payload, headers)
        response = conn.getresponse()
        text = response.read().decode("utf-8", errors="replace")
        conn.close()
        return response.status, text

    def _index(
        self, inputs: list | None = None, outputs: list | None = None, api_name: str | None = None
    ) -> int:
        ids = {c["id"]: c.get("props", {}).get("elem_id") for c in self._config["components"]}
        for index, dep in enumerate(self._config["dependencies"]):
            if api_name is not None and dep.get("api_name") == api_name:
                return index
            if inputs is not None and [ids.get(i) for i in dep["inputs"]] == inputs and [
                ids.get(o) for o in dep["outputs"]
            ] == outputs:
                return index
        raise LookupError(f"no event {api_name or (inputs, outputs)}")

    def _predict(self, fn_index: int, data: list) -> tuple[int, str]:
        """An unqueued handler, called by fn_index."""
        body = json.dumps({"fn_index": fn_index, "data": data, "session_hash": self.session}).encode()
        return self._post("/gradio_api/run/predict", body, {"Content-Type": "application/json"})

    def _queued(self, fn_index: int, data: list) -> str:
        """A queued handler: join, then read the event stream to its end; the whole stream."""
        body = json.dumps({"data": data, "fn_index": fn_index, "session_hash": self.session,
                           "event_data": None, "trigger_id": None}).encode()
        status, text = self._post("/gradio_api/queue/join", body, {"Content-Type": "application/json"})
        if status != 200:
            return text  # refused at the door (one job per session): an answer too
        conn = self._connection()
        conn.request("GET", f"/gradio_api/queue/data?session_hash={self.session}")
        text = conn.getresponse().read().decode("utf-8", errors="replace")
        conn.close()
        return text

    def _upload(self, path: Path) -> dict:
        boundary = uuid.uuid4().hex
        payload = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{path.name}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode() + path.read_bytes() + f"\r\n--{boundary}--\r\n".encode()
        status, text = self._post(
            "/gradio_api/upload", payload, {"Content-Type": f"multipart/form-data; boundary={boundary}"}
        )
        if status != 200:
            raise RuntimeError(f"upload refused: {status} {text[:200]}")
        return {"path": json.loads(text)[0], "orig_name": path.name, "meta": {"_type": "gradio.FileData"}}

    @staticmethod
    def _suite_file(path: Path) -> Path:
        lines = [{"name": "t0", "prompt": "short", "env": "bank"}]
        lines += [{"name": f"t{i}", "prompt": "x" * 1_200_000, "env": "bank"} for i in range(1, 8)]
        path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
        return path

    def _seen(self, kind: str, text: str, seconds: float) -> None:
        self.report.note(kind, seconds)
        for canary in self.canaries:
            if canary in text:
                self.report.leaks.append(f"{kind}: a secret in the answer")

    # ---- the attack -------------------------------------------------------------------------

    def run(self) -> None:
        try:
            status = self._index(["schema-editor", "environment"], ["schema-status"])
            run = self._index(api_name="run")
            suite, estimate = self._index(api_name="run_suite"), self._index(api_name="suite_estimate")
            # The page's Session, as a browser's load makes it.
            self._predict(self._index(api_name="new_session"), [])
            while not self.stop.is_set():
                self._round(status, run, suite, estimate)
                self.report.rounds += 1
        except Exception as err:  # the app stopped answering: that is what the load test looks for
            self.report.errors.append(f"{type(err).__name__}: {err}")
        finally:
            self._tmp.cleanup()

    def _round(self, status: int, run: int, suite: int, estimate: int) -> None:
        for name, text in self.texts.items():
            if self.stop.is_set():
                return
            started = time.monotonic()
            code, answer = self._predict(status, [text, "none"])
            self._seen("status", answer, time.monotonic() - started)
            if code != 200:
                self.report.errors.append(f"status {name}: HTTP {code}: {answer[:200]}")
        hostile = self.texts[f"open_escapes@{SIZES[0]}"]
        started = time.monotonic()
        answer = self._queued(run, [hostile, "none", "Say hi.", "none", 1, 0.6, 0.95, 20, 96, 0, False, 1])
        self._seen("run", answer, time.monotonic() - started)
        upload = self._upload(self.suite_file)
        knobs = [8, SUITE_MODES, 1, 3, 0.6, 0.95, 20, 96, 0, False, 1]
        started = time.monotonic()
        code, answer = self._predict(estimate, ["upload", "bank", upload, 8, SUITE_MODES, 1, 3, 96])
        self._seen("suite_estimate", answer, time.monotonic() - started)
        if code != 200:
            self.report.errors.append(f"suite estimate: HTTP {code}: {answer[:200]}")
        started = time.monotonic()
        answer = self._queued(suite, [None, "upload", "bank", upload, *knobs])
        self._seen("suite", answer, time.monotonic() - started)
