"""The app's handlers over plain HTTP, as a page calls them: ``handler_index`` and
``event_index`` find an event's fn_index in the app's config, ``call_handler`` makes one
unqueued call, ``QueuedCall`` one queued call read from its event stream."""

from __future__ import annotations

import json
import socket


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
