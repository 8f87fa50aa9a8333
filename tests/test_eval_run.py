"""``eval`` runs: concurrency, resume, retries and failures, against a scripted
chat-completions server on 127.0.0.1 (see test_openai_backend.ChatServer) and, marked
slow, a real ``transformers serve`` with the embedded model."""

import json
import threading
import time

import pytest

from conftest import SHARED_BFCL, VENDORED_BFCL
from envace_demo.bfcl import reference_calls
from envace_demo.cli import main
from envace_demo.evaluation import load_eval_tasks, load_results, plan, run_jobs
from envace_demo.evaluation.coalesce import CoalescingBackend
from envace_demo.models.base import Backend, Generation, ModelInfo, Prompt, Sampling
from envace_demo.models.openai_backend import OpenAIBackend
from envace_demo.tasks import load_task_file
from helpers import call_deltas, text_deltas

BFCL = VENDORED_BFCL if VENDORED_BFCL.exists() else SHARED_BFCL
SIMPLE = BFCL / "bfcl_simple.jsonl"


def _answers(path, limit):
    """prompt -> the reference call of each BFCL record (a scripted agent that is always right)."""
    out = {}
    for task in load_task_file(path, limit=limit):
        (call,) = reference_calls(task.check["calls"], task.tools)
        out[task.prompt] = call
    return out


def _agent(answers, fail_if=lambda body: False):
    lock = threading.Lock()

    def reply(body):
        with lock:
            if fail_if(body):
                return [{"status": 500}]
        if "tools" not in body:  # the rehearser
            return text_deltas('<think>s</think>\n<execution_result>\n{"ok": true}\n</execution_result>')
        if body["messages"][-1]["role"] == "tool":  # a rehearsal saw its call's result: answer
            return text_deltas("Done.")
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        call = answers[user]
        return call_deltas(call.name, call.arguments)

    return reply


def test_eval_runs_every_task_mode_and_seed_concurrently_and_resumes(chat_server, tmp_path, capsys):
    answers = _answers(SIMPLE, 3)
    server = chat_server(_agent(answers))
    out = tmp_path / "run"
    argv = ["eval", "--tasks", str(SIMPLE), "--limit", "3", "--modes", "none,parallel", "--n", "2", "--seeds", "2",
            "--concurrency", "4", "--out", str(out), "--backend", "openai", "--base-url", server.url,
            "--json", "--no-progress"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    keys = {(r["task_id"], r["mode"], r["seed"]) for r in report["tasks"]}
    assert len(keys) == len(report["tasks"]) == 3 * 2 * 2
    assert all(r["success"] is True and r["error"] is None and r["validity"] == 1.0 for r in report["tasks"])
    (none, par) = report["summary"]["rows"]
    assert par["diff"]["success"] == {"mean": 0.0, "n": 6, "ci": [0.0, 0.0]}
    assert par["tokens"]["mean"] > none["tokens"]["mean"]  # rehearsals cost tokens
    assert {"results.jsonl", "summary.json", "report.md", "charts", "run.json"} <= {p.name for p in out.iterdir()}
    assert len(load_results(out / "results.jsonl")) == 12

    # Stopped after 9 episodes: drop the last three lines (and cut the one before in half).
    lines = (out / "results.jsonl").read_text().splitlines()
    (out / "results.jsonl").write_text("\n".join(lines[:8]) + "\n" + lines[8][:50])
    sent = len(server.requests)
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert len(report["tasks"]) == 12 and all(r["success"] for r in report["tasks"])
    redone = server.requests[sent:]
    # Four episodes again, none of the eight kept: a none episode sends 1 request, a parallel one 8
    # (two rehearsals of call, rehearsal, answer; then the committed call and its rehearsal).
    assert 4 <= len(redone) <= 4 * 8
    assert len(load_results(out / "results.jsonl")) == 12
    sent = len(server.requests)
    assert main(argv) == 0 and len(server.requests) == sent  # all done: nothing runs
    capsys.readouterr()

    assert main([*argv[:8], "3", *argv[9:]]) == 2  # another N: refused, not mixed into the table
    assert "other settings (n: 2 then, 3 now)" in capsys.readouterr().err


def test_a_request_that_fails_twice_then_succeeds(chat_server):
    failures = iter([True, True])
    server = chat_server(lambda body: [{"status": 503}] if next(failures, False) else text_deltas("ok"))
    backend = OpenAIBackend(server.url, "served-model", retries=3, backoff=0.01)
    gen = backend.generate(backend.prompt([{"role": "user", "content": "hi"}]), Sampling())
    assert gen.text == "ok" and len(server.requests) == 3
    # A client error is not retried: the same request would fail again.
    bad = chat_server(lambda body: [{"status": 400}])
    with pytest.raises(Exception, match="HTTP 400"):
        OpenAIBackend(bad.url, "served-model", backoff=0.01).generate(backend.prompt([]), Sampling())
    assert len(bad.requests) == 1


def test_an_episode_whose_requests_always_fail_is_recorded_and_the_run_completes(chat_server, tmp_path, capsys):
    answers = _answers(SIMPLE, 3)
    doomed = list(answers)[1]
    server = chat_server(_agent(answers, fail_if=lambda body: any(m["content"] == doomed for m in body["messages"])))
    out = tmp_path / "run"
    argv = ["eval", "--tasks", str(SIMPLE), "--limit", "3", "--modes", "none", "--concurrency", "2",
            "--out", str(out), "--backend", "openai", "--base-url", server.url, "--json", "--no-progress"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    failed = [r for r in report["tasks"] if r["error"]]
    assert len(report["tasks"]) == 3 and len(failed) == 1
    assert "HTTP 500" in failed[0]["error"] and "after 4 tries" in failed[0]["error"]
    assert all(r["success"] for r in report["tasks"] if not r["error"])
    (row,) = report["summary"]["rows"]
    assert (row["episodes"], row["errors"], row["success"]["n"]) == (3, 1, 2)
    assert len(load_results(out / "results.jsonl")) == 3


def test_run_jobs_keeps_going_past_an_exception_and_stops_handing_out_jobs_on_cancel(tmp_path):
    tasks = load_eval_tasks([SIMPLE], limit=4)
    jobs = plan(tasks, ["none"], [0])
    cancel = threading.Event()

    def run_one(job):
        if job.etask.task_id.endswith("_1"):
            raise ValueError("boom")
        cancel.set() if job.etask.task_id.endswith("_2") else None
        from envace_demo.record import Trajectory

        return Trajectory(mode="none", model={}, tools=[], prompt="p", task=job.etask.task.name)

    got = list(run_jobs(jobs, run_one, concurrency=1, results=tmp_path / "r.jsonl", cancel=cancel))
    assert [r["task_id"].rsplit("_", 1)[1] for r in got] == ["0", "1", "2"]  # the 4th never started
    assert got[1]["error"] == "ValueError: boom" and got[0]["error"] is None
    assert len(load_results(tmp_path / "r.jsonl")) == 3


def test_an_episode_stopped_midway_is_not_a_result(tmp_path):
    from envace_demo.record import Trajectory

    jobs = plan(load_eval_tasks([SIMPLE], limit=2), ["none"], [0])
    ended = iter(["answer", "cancelled"])
    got = list(run_jobs(jobs, lambda job: Trajectory(mode="none", model={}, tools=[], prompt="p", ended=next(ended)),
                        results=tmp_path / "r.jsonl"))
    assert [r["ended"] for r in got] == ["answer"]
    assert list(load_results(tmp_path / "r.jsonl")) == [("bfcl_simple:simple_python_0", "none", 0)]


@pytest.mark.slow
def test_eval_through_transformers_serve_with_concurrency(transformers_server, tmp_path, capsys):
    url, _, _ = transformers_server
    out = tmp_path / "serve"
    assert main(["eval", "--tasks", str(BFCL / "bfcl_multiple.jsonl"), "--limit", "2", "--modes", "none,parallel",
                 "--n", "2", "--seeds", "1", "--concurrency", "4", "--max-new-tokens", "24", "--max-steps", "1",
                 "--imagined-others", "always",
                 "--out", str(out), "--backend", "openai", "--base-url", url, "--json", "--no-progress"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {(r["task_id"], r["mode"]) for r in report["tasks"]} == {
        (f"bfcl_multiple:multiple_{i}", m) for i in range(2) for m in ("none", "parallel")}
    assert all(r["error"] is None and r["tokens"] > 0 for r in report["tasks"]), [r["error"] for r in report["tasks"]]
    saved = load_results(out / "results.jsonl")  # the full episode records
    assert len(saved) == 4 and (out / "report.md").exists()
    assert all(len(r["trajectory"]["rehearsals"]) == 2 for r in saved.values() if r["mode"] == "parallel")


class _Recorder(Backend):
    """Records the batches it is asked for; each row answers with its own prompt."""

    supports_constraints = True

    def __init__(self, fail=False):
        self.calls: list[tuple[str, int]] = []
        self.fail = fail

    @property
    def info(self):
        return ModelInfo("recorder", "cpu", "none")

    def render(self, messages, tools=None, enable_thinking=True):
        return messages[-1]["content"]

    def generate(self, prompt, sampling, constraint=None, on_token=None, cancel=None):
        self.calls.append(("generate", 1))
        return Generation(f"{prompt.text}/alone", 1, 1, 0.0)

    def generate_many(self, prompts, sampling, constraints=None, on_token=None, cancel=None):
        self.calls.append(("generate_many", len(prompts)))
        time.sleep(0.05)
        if self.fail:
            raise RuntimeError("out of memory")
        for row, prompt in enumerate(prompts):
            if on_token:
                on_token(row, prompt.text)
        return [Generation(p.text, 1, 1, 0.0) for p in prompts]


def _chat(text: str) -> Prompt:
    return Prompt([{"role": "user", "content": text}], text=text)


def test_concurrent_episodes_on_an_in_process_model_share_batches():
    inner = _Recorder()
    backend = CoalescingBackend(inner, episodes=3, window_s=2.0)
    out, streamed, barrier = {}, {}, threading.Barrier(3)

    def episode(k):
        barrier.wait()
        seen = []
        if k == 2:
            out[k] = [backend.generate(_chat(f"p{k}"), Sampling(seed=k), on_token=lambda r, t: seen.append((r, t)))]
        else:
            prompts = [_chat(f"p{k}a"), _chat(f"p{k}b")]
            out[k] = backend.generate_many(prompts, Sampling(seed=k), on_token=lambda r, t: seen.append((r, t)))
        streamed[k] = seen

    threads = [threading.Thread(target=episode, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert inner.calls == [("generate_many", 5)] and backend.batches == [5]  # three callers, one batch
    assert [g.text for g in out[0]] == ["p0a", "p0b"] and [g.text for g in out[2]] == ["p2"]
    assert streamed[1] == [(0, "p1a"), (1, "p1b")]  # each caller sees its own rows, numbered from 0
    # Alone (the window passes): the call goes to the inner backend as it was made.
    alone = CoalescingBackend(inner, episodes=3, window_s=0.01)
    assert alone.generate(_chat("q"), Sampling()).text == "q/alone" and inner.calls[-1] == ("generate", 1)
    assert [g.text for g in alone.generate_many([_chat("q1"), _chat("q2")], Sampling())] == ["q1", "q2"]
    assert inner.calls[-1] == ("generate_many", 2) and backend.batches == [5]


def test_a_failed_merged_batch_fails_each_of_its_callers():
    backend = CoalescingBackend(_Recorder(fail=True), episodes=2, window_s=2.0)
    errors, barrier = [], threading.Barrier(2)

    def episode(k):
        barrier.wait()
        try:
            backend.generate_many([_chat(f"p{k}")], Sampling())
        except RuntimeError as err:
            errors.append(str(err))

    threads = [threading.Thread(target=episode, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert errors == ["out of memory", "out of memory"]
