"""Hostile schema texts: how long the loader takes to answer each family, at each size.

    python -m bench.hostile [--sizes 65536,1000000] [--status] [--json]

Each family is a text a visitor could paste or send (``families``); each is fed to
``python -m envace_demo schema -`` (a fresh process: the loader and its checks as the CLI
and the app run them), under the default policy and under the public one (``--public``).
Reports, for each family, size and policy, the wall time and the first line of the
answer: the tools loaded, or the located error.

``--status``: the same texts through the schema editor's status handler instead, as any
client can call it (plain HTTP by ``fn_index``) on the app served on 127.0.0.1, once in
private mode (the default policy) and once in public mode. The model is never needed
there: the app is built with one that never finishes loading.

The families: deep nesting (arrays, objects), a string of escaped quotes left open after
more brackets than the depth limit (``"[]"*33 + '"' + '\\\\"'*N``) and the same ending on a
lone backslash, many bracket pairs, many quotes, many properties, many keys in an
annotation, one long string, many tools, a long enum and many ``$ref`` expansions.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]


def _fill(head: str, unit: str, tail: str, size: int) -> str:
    """``head + unit * k + tail`` with k as large as keeps it within ``size`` characters."""
    return head + unit * max(0, (size - len(head) - len(tail)) // len(unit)) + tail


def _tool(params: str, extra: str = "") -> str:
    return '{"name": "t", "description": "d"%s, "parameters": %s}' % (extra, params)


def _many_properties(size: int) -> str:
    props, i, out = [], 0, 0
    while out < size - 200:
        prop = '"p%d": {"type": "string", "description": "x"}' % i
        props.append(prop)
        out += len(prop) + 2
        i += 1
    return _tool('{"type": "object", "properties": {%s}}' % ", ".join(props))


def _many_tools(size: int) -> str:
    # Ordinary tools, 128 of them (the default cap; the public one is lower), each with as
    # many properties as fit: the largest legitimate work.
    count = 128
    per_tool = max(1, (size // count - 80) // 30)
    tools = []
    for i in range(count):
        props = ", ".join('"p%d": {"type": "string"}' % j for j in range(min(per_tool, 500)))
        tools.append('{"name": "t%d", "parameters": {"type": "object", "properties": {%s}}}' % (i, props))
    text = "[" + ", ".join(tools) + "]"
    while len(text) > size:  # trim whole tools to stay within size
        tools.pop()
        text = "[" + ", ".join(tools) + "]"
    return text


def _many_keys(size: int) -> str:
    keys, out, i = [], 160, 0
    while out < size:
        key = '"k%d": %d' % (i, i)
        keys.append(key)
        out += len(key) + 2
        i += 1
    return _tool('{"type": "object", "properties": {}}', ', "x-extra": {%s}' % ", ".join(keys[:-1]))


def _refs(size: int) -> str:
    # One definition referenced from objects of 400 properties each, as many as fit.
    define = '"$defs": {"D": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}}'
    groups, out, i = [], len(define) + 200, 0
    while True:
        props = ", ".join('"p%d": {"$ref": "#/$defs/D"}' % j for j in range(400))
        group = '"g%d": {"type": "object", "properties": {%s}}' % (i, props)
        if out + len(group) + 2 > size:
            break
        groups.append(group)
        out += len(group) + 2
        i += 1
    return _tool('{"type": "object", %s, "properties": {%s}}' % (define, ", ".join(groups)))


FAMILIES: dict[str, Callable[[int], str]] = {
    "deep_arrays": lambda n: "[" * (n // 2) + "]" * (n // 2),
    "deep_objects": lambda n: _fill("", '{"a":', "", n // 2) + "}" * (n // 10),
    "open_escapes": lambda n: _fill("[]" * 33 + '"', '\\"', "", n),
    "open_escapes_backslash": lambda n: _fill("[]" * 33 + '"', '\\"', "\\", n),
    "bracket_pairs": lambda n: _fill("[", "[],", "[]]", n),
    "quotes": lambda n: _fill("[]" * 33, '"', "", n),
    "many_properties": _many_properties,
    "many_keys": _many_keys,
    "long_string": lambda n: _fill('{"name": "t", "description": "', "a", '"}', n),
    "many_tools": _many_tools,
    "long_enum": lambda n: _tool(
        '{"type": "object", "properties": {"u": {"type": "string", "enum": [%s]}}}'
        % _fill("", '"v",', '"v"', n - 120)
    ),
    "refs": _refs,
}


def families(size: int) -> dict[str, str]:
    """Each family's text at about ``size`` characters (never more)."""
    out = {}
    for name, make in FAMILIES.items():
        text = make(size)
        assert len(text) <= size + 64, (name, len(text))
        out[name] = text
    return out


def measure_cli(text: str, public: bool, timeout: float = 600.0) -> dict:
    """``python -m envace_demo schema -`` on ``text``: wall time and the answer's first line."""
    cmd = [sys.executable, "-m", "envace_demo", "schema", "-"] + (["--public"] if public else [])
    env = {**os.environ, "ENVACE_PUBLIC": "", "SPACE_ID": ""}
    start = time.perf_counter()
    done = subprocess.run(cmd, input=text.encode(), capture_output=True, cwd=ROOT, env=env, timeout=timeout)
    seconds = time.perf_counter() - start
    if done.returncode == 0:
        answer = f"loaded {len(json.loads(done.stdout))} tools"
    else:
        answer = (done.stderr.decode(errors="replace").strip().splitlines() or ["(no message)"])[-1]
    return {"seconds": round(seconds, 3), "exit": done.returncode, "answer": answer[:160]}


def startup_seconds() -> float:
    """The CLI's own start (imports), measured on a tiny valid schema: subtract it to see the loader."""
    return measure_cli('{"name": "t"}', public=False)["seconds"]


def measure_status(texts: dict[str, str], public: bool) -> dict[str, dict]:
    """Each text through the editor's status handler of the app (``public`` mode or not),
    served on 127.0.0.1: the HTTP round trip's wall time and the answer's text."""
    import http.client
    import re
    import threading

    from envace_demo.errors import ModelError
    from envace_demo.settings import Settings
    from envace_demo.ui import build_app
    from envace_demo.ui.holder import ModelHolder

    never = threading.Event()

    def never_loads(settings: Settings):
        never.wait()
        raise ModelError("the measurement ended before any model was needed")

    settings = Settings(public=public, model="unused")
    holder = ModelHolder(settings, loader=never_loads)
    holder.start()
    demo = build_app(settings, holder=holder)
    _, url, _ = demo.launch(server_name="127.0.0.1", server_port=None, prevent_thread_lock=True, quiet=True)
    port = int(url.rstrip("/").rsplit(":", 1)[1])
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        conn.request("GET", "/config")
        config = json.loads(conn.getresponse().read())
        ids = {c["id"]: c.get("props", {}).get("elem_id") for c in config["components"]}
        index = next(
            i for i, dep in enumerate(config["dependencies"])
            if [ids.get(x) for x in dep["inputs"]] == ["schema-editor", "environment"]
            and [ids.get(x) for x in dep["outputs"]] == ["schema-status"]
        )
        out = {}
        for name, text in texts.items():
            body = json.dumps({"fn_index": index, "data": [text, "none"], "session_hash": "hostile"})
            start = time.perf_counter()
            conn.request("POST", "/gradio_api/run/predict", body, {"Content-Type": "application/json"})
            response = conn.getresponse()
            answer = response.read().decode("utf-8", errors="replace")
            seconds = time.perf_counter() - start
            shown = json.loads(answer).get("data", [answer])[0] if response.status == 200 else answer
            plain = re.sub(r"<[^>]+>", " ", str(shown))
            out[name] = {"seconds": round(seconds, 3), "http": response.status,
                         "answer": " ".join(plain.split())[:160]}
        conn.close()
        return out
    finally:
        never.set()
        demo.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hostile", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="65536,1000000", help="text sizes in characters, comma-separated")
    parser.add_argument("--families", default=",".join(FAMILIES), help="which families, comma-separated")
    parser.add_argument(
        "--status", action="store_true", help="through the editor's status handler of the app"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    chosen = args.families.split(",")
    rows = []
    if args.status:
        texts = {(name, size): families(size)[name] for size in sizes for name in chosen}
        for public in (False, True):
            answers = measure_status({f"{n}@{z}": t for (n, z), t in texts.items()}, public)
            for (name, size) in texts:
                row = {"family": name, "size": size, "policy": "public" if public else "default",
                       **answers[f"{name}@{size}"]}
                rows.append(row)
                if not args.json:
                    line = f"{name:24} {size:>9,} {row['policy']:8} {row['seconds']:7.2f}s  {row['answer']}"
                    print(line, flush=True)
        summary = {"path": "status handler", "worst_s": max(r["seconds"] for r in rows), "rows": rows}
        print(json.dumps(summary, indent=2) if args.json else f"slowest answer: {summary['worst_s']:.2f}s")
        return 0
    base = startup_seconds()
    for size in sizes:
        texts = families(size)
        for name in chosen:
            for public in (False, True):
                row = {"family": name, "size": size, "policy": "public" if public else "default"}
                row.update(measure_cli(texts[name], public))
                rows.append(row)
                if not args.json:
                    print(f"{name:24} {size:>9,} {row['policy']:8} {row['seconds']:7.2f}s  {row['answer']}", flush=True)
    worst = max(r["seconds"] for r in rows)
    summary = {"startup_s": base, "worst_s": worst, "rows": rows}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"CLI start (tiny schema): {base:.2f}s; slowest answer: {worst:.2f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
