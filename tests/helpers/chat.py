"""A scripted OpenAI-compatible chat server (the ``chat_server`` fixture starts them) and the
stream items it replies with: ``call_deltas``, ``text_deltas``."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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
