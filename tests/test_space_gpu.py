"""The app's GPU wrapper on ZeroGPU terms, driven through the real ``spaces`` package where
it runs on a CPU (its scheduler client and arithmetic, its errors, its request variable):
what a run asks for and how spaces schedules it, Compare in one call, a quota refusal
explained, no CUDA touched at load, Stop reaching a forked worker, the visitor's request
carried into the suite's threads, and a remote backend that never asks for a GPU. spaces'
client talks to a stand-in scheduler on 127.0.0.1 for a refusal and a granted suite.

spaces' ZeroGPU mode itself (its fork and CUDA patching) cannot be imported here: it
patches a CUDA build of torch."""

from __future__ import annotations

import json
import multiprocessing
import threading
from datetime import timedelta
from importlib.resources import files
from unittest import mock

import pytest

from conftest import call_text, result_text
from envace_demo.engine import EpisodeConfig
from envace_demo.evaluation.batch import run_jobs
from envace_demo.events import EpisodeFinished
from envace_demo.models import hardware
from envace_demo.models.hardware import DEFAULT_GPU_MODEL, Machine
from envace_demo.plan import plan
from envace_demo.settings import Settings
from envace_demo.tasks import find_task
from envace_demo.ui import gpu, runner
from envace_demo.ui.holder import ModelHolder

spaces = pytest.importorskip("spaces")
from spaces.zero import client as spaces_client  # noqa: E402
from spaces.zero.gradio import error as spaces_error  # noqa: E402

ZERO = {"SPACE_ID": "owner/name", "SPACES_ZERO_GPU": "true"}
GPU = Machine(cuda=True, nvidia_driver=True, embedded=False, cache_writable=True)
BALANCE = call_text("get_account", {"account_id": "ACC-1003"})
ANSWER = "<think>done</think>\nThe balance of ACC-1003 is 310.25 USD."
PREDICTED = {"account_id": "ACC-1003", "owner": "Ben Okafor", "balance": 300.0}


def blackwell() -> dict:
    configs = json.loads(files("spaces.zero").joinpath("configs.json").read_text())
    return next(c for c in configs if "Blackwell" in c["model"])


@pytest.fixture(params=["auto", "large"])
def zero_settings(request):
    """ZeroGPU as planned (the 8B's calls on the whole card, size xlarge), and on half a card."""
    env = {**ZERO, "ENVACE_GPU_SIZE": request.param}
    settings = hardware.plan_model(Settings.from_env(env), GPU).apply(Settings.from_env(env))
    assert settings.gpu_size == ("xlarge" if request.param == "auto" else "large")
    gpu.configure(settings)
    yield settings
    gpu.configure(Settings())


def spaces_schedules(duration: int) -> int:
    """What spaces' scheduler is asked for, on today's ZeroGPU card, for a request of
    ``duration`` of the size the app's GPU calls ask for."""
    with mock.patch.object(spaces_client.config, "get_config", return_value=blackwell()):
        return round(spaces_client.get_duration_seconds(timedelta(seconds=duration), gpu.gpu_size()))


def test_the_default_run_schedules_a_minute_at_most(zero_settings):
    task = find_task("bank", "check-balance")
    config = runner.fitted_to_call(EpisodeConfig(episode_seconds=zero_settings.episode_seconds))
    asked = gpu.GPU_FUNCTIONS["envace_demo.ui.runner._episode"](task, config)
    assert spaces_schedules(asked) == gpu.scheduled_seconds(asked) <= 60
    assert asked == plan("zero-a10g", DEFAULT_GPU_MODEL, gpu_size=zero_settings.gpu_size).gpu_duration_seconds
    # A visitor's longer budget is cut to one call's bound, never asked for in full.
    long = runner.fitted_to_call(EpisodeConfig(episode_seconds=300))
    assert spaces_schedules(gpu.GPU_FUNCTIONS["envace_demo.ui.runner._episode"](task, long)) <= 60
    # A smaller budget asks for less: the duration follows the request.
    short = EpisodeConfig(episode_seconds=10)
    assert gpu.GPU_FUNCTIONS["envace_demo.ui.runner._episode"](task, short) < asked


def test_compare_runs_both_sides_in_one_call_within_the_bound(zero_settings, scripted, monkeypatch):
    backend = scripted(actor=[BALANCE, ANSWER] * 3, rehearser=[result_text(PREDICTED)] * 3)
    runner.bind(_holder(backend))
    calls: list[int] = []
    real = runner._compare_on_gpu

    def counted(task, configs, token=None, slot=None):
        calls.append(gpu.GPU_FUNCTIONS["envace_demo.ui.runner._compare"](task, configs, token, slot))
        yield from real(task, configs, token, slot)

    monkeypatch.setattr(runner, "_compare_on_gpu", counted)
    task = find_task("bank", "check-balance")
    default = EpisodeConfig(episode_seconds=zero_settings.episode_seconds)
    configs = {"none": EpisodeConfig(mode="none", episode_seconds=default.episode_seconds),
               "parallel": EpisodeConfig(mode="parallel", n=1, episode_seconds=default.episode_seconds)}
    sides = [side for side, e in runner.compare_events(task, configs) if isinstance(e, EpisodeFinished)]
    assert sides == ["none", "parallel"]
    assert len(calls) == 1 and spaces_schedules(calls[0]) <= 60


def test_a_quota_refusal_shows_spaces_message_and_a_way_on(zero_settings, scripted, monkeypatch):
    import gradio as gr

    runner.bind(_holder(scripted()))
    message = "You have exceeded your free ZeroGPU quota (60s requested vs. 41s left). Try again in 0:10:00. "

    def refused(*args):
        raise spaces_error("ZeroGPU quota exceeded", message)  # what spaces' schedule() raises
        yield  # pragma: no cover

    monkeypatch.setattr(runner, "_episode_on_gpu", refused)
    task = find_task("bank", "check-balance")
    with pytest.raises(gr.Error) as err:
        list(runner.episode_events(task, EpisodeConfig(episode_seconds=zero_settings.episode_seconds)))
    text = str(err.value.message)
    assert "41s left" in text and "Try again in 0:10:00" in text  # spaces' own words
    assert "smaller N" in text and "signing in" in text  # and a way on
    asked = int(zero_settings.episode_seconds) + hardware.GPU_MARGIN_SECONDS
    assert f"this run asked for {asked} s, scheduled as {gpu.scheduled_seconds(asked)} s" in text
    if zero_settings.gpu_size == "xlarge":  # what it costs: twice, on the whole card
        assert f"on a whole card, {2 * gpu.scheduled_seconds(asked)} s of the quota" in text
    assert err.value.title == "ZeroGPU quota exceeded"


def test_other_errors_pass_unchanged(zero_settings, scripted, monkeypatch):
    runner.bind(_holder(scripted()))

    def broken(*args):
        raise RuntimeError("not a refusal")
        yield  # pragma: no cover

    monkeypatch.setattr(runner, "_episode_on_gpu", broken)
    with pytest.raises(RuntimeError, match="not a refusal"):
        list(runner.episode_events(find_task("bank", "check-balance"), EpisodeConfig()))


def test_nothing_touches_cuda_while_the_model_loads_on_zerogpu(monkeypatch, scripted):
    """ZeroGPU loads at import; the speed fit (fork_rng on device 0, and any CUDA call) must
    not run then: the plan's speed is used, corrected by finished runs."""
    import torch

    def forbidden(*args, **kwargs):
        raise AssertionError("CUDA touched outside a GPU call")

    for name in ("_lazy_init", "get_rng_state", "set_rng_state", "synchronize", "init"):
        monkeypatch.setattr(torch.cuda, name, forbidden)
    monkeypatch.setattr(hardware, "detect_machine", lambda settings: GPU)
    measured: list = []
    settings, holder = gpu.start_model(
        Settings.from_env(ZERO), loader=lambda s: scripted(), measure=lambda b: measured.append(b)
    )
    try:
        st = holder.status()
        assert st.state == "ready" and measured == []
        zero = plan("zero-a10g", DEFAULT_GPU_MODEL)
        assert st.plan == zero and st.budget.max_new_tokens == zero.max_new_tokens
        assert (zero.mode, settings.gpu_size, gpu.gpu_size()) == ("parallel", "xlarge", "xlarge")
        assert st.speed.decode == pytest.approx(zero.decode_tokens_per_s)
        assert settings.concurrency == zero.concurrency > 1  # several visitors at once
        # Public mode caps the controls at the settings' values: they carry the plan's.
        assert (settings.max_new_tokens, settings.max_steps) == (zero.max_new_tokens, zero.max_steps)
        from envace_demo.ui.options import UIOptions

        assert UIOptions.from_settings(settings).max_new_tokens >= zero.think_tokens + 128
    finally:
        gpu.configure(Settings())


def test_off_zerogpu_the_plan_is_made_again_with_the_measured_speed(monkeypatch, scripted):
    from envace_demo.budget import Speed

    l4 = Machine(True, True, False, True, gpu_name="NVIDIA L4", gpus=1)
    monkeypatch.setattr(hardware, "detect_machine", lambda settings: l4)
    _, holder = gpu.start_model(
        Settings.from_env({"SPACE_ID": "o/n"}), loader=lambda s: scripted(), measure=lambda b: Speed(4.0, 400.0)
    )
    st = holder.status() if holder.wait(timeout=30) else None
    slow = plan("l4x1", DEFAULT_GPU_MODEL, measured_decode=4.0)
    assert st.plan == slow and st.plan.decode_tokens_per_s < plan("l4x1", DEFAULT_GPU_MODEL).decode_tokens_per_s
    assert st.budget.episode_seconds >= st.budget.estimate_seconds


def _watch_flag(slot: int, seen) -> None:
    """In a forked child, as spaces' GPU worker is: wait for Stop's flag."""
    cancel = runner.SharedCancel(slot)
    for _ in range(200):
        if cancel.is_set():
            seen.set()
            return
        threading.Event().wait(0.05)


def test_stop_reaches_a_forked_gpu_worker():
    """spaces forks its worker (multiprocessing 'fork'); a threading.Event does not cross,
    the shared flag set by Stop in this process does."""
    ctx = multiprocessing.get_context("fork")
    cancel = threading.Event()
    mirror = runner._Mirror(cancel)
    seen = ctx.Event()
    try:
        child = ctx.Process(target=_watch_flag, args=(mirror.slot, seen))
        child.start()
        assert not seen.wait(0.3)  # not yet stopped
        cancel.set()  # Stop, in the main process
        child.join(timeout=15)
        assert seen.is_set()
    finally:
        mirror.close()


def test_stop_ends_a_run_through_the_shared_flag(scripted):
    backend = scripted(actor=[BALANCE] * 10, rehearser=[result_text(PREDICTED)] * 10, delay=0.5)
    runner.bind(_holder(backend))
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    ended = None
    for event in runner.episode_events(find_task("bank", "check-balance"), EpisodeConfig(mode="none"), cancel):
        if isinstance(event, EpisodeFinished):
            ended = event.trajectory.ended
    assert ended == "cancelled"


def test_suite_episodes_carry_the_visitors_request():
    """spaces reads the visitor from gradio's request variable (spaces.utils.gradio_request_var):
    a thread pool drops it unless the context is carried."""
    from spaces.utils import gradio_request_var

    request_var = gradio_request_var()
    visitor = object()
    token = request_var.set(visitor)
    try:
        from envace_demo.evaluation.batch import EvalTask, Job

        jobs = [Job(EvalTask(task_id=f"t{i}", category="c", task=find_task("bank", "check-balance")), "none", i)
                for i in range(3)]
        seen: list = []

        def run_one(job):
            seen.append(request_var.get(None))
            raise RuntimeError("recorded")  # an episode's failure is a record, not a crash

        list(run_jobs(jobs, run_one, concurrency=2))
        assert seen and all(v is None for v in seen)  # the bare pool drops it
        seen.clear()
        list(run_jobs(jobs, runner.carrying_context(run_one), concurrency=2))
        assert seen == [visitor] * 3
    finally:
        request_var.reset(token)


def test_a_remote_backend_never_asks_for_a_gpu(scripted, monkeypatch):
    backend = scripted(actor=[ANSWER])
    holder = ModelHolder(Settings(backend="openai", base_url="http://127.0.0.1:1/v1"), loader=lambda s: backend)
    holder.start()
    holder.wait(timeout=30)
    runner.bind(holder)

    def no_gpu(*args):
        raise AssertionError("asked for a GPU")
        yield  # pragma: no cover

    monkeypatch.setattr(runner, "_episode_on_gpu", no_gpu)
    monkeypatch.setattr(runner, "_compare_on_gpu", no_gpu)
    task = find_task("bank", "check-balance")
    assert runner.run_to_end(task, EpisodeConfig(mode="none")).ended
    configs = {"none": EpisodeConfig(mode="none")}
    backend.actor = [ANSWER]
    assert any(isinstance(e, EpisodeFinished) for _, e in runner.compare_events(task, configs))
    # A local model does ask.
    runner.bind(_holder(scripted(actor=[ANSWER])))
    with pytest.raises(AssertionError, match="asked for a GPU"):
        runner.run_to_end(task, EpisodeConfig(mode="none"))


def _holder(backend) -> ModelHolder:
    holder = ModelHolder(Settings(), loader=lambda settings: backend)
    holder.start()
    holder.wait(timeout=60)
    return holder


def test_training_on_zerogpu_is_off_with_the_reason(monkeypatch, scripted):
    """The plan says why (one GRPO step does not fit a visitor's call); the Train tab shows it."""
    from types import SimpleNamespace

    from envace_demo.ui.options import UIOptions
    from envace_demo.ui.train_tab import TrainHandlers

    monkeypatch.setattr(hardware, "detect_machine", lambda settings: GPU)
    settings, holder = gpu.start_model(Settings.from_env({**ZERO, "ENVACE_PUBLIC": "0"}), loader=lambda s: scripted())
    try:
        status = object()
        tab = SimpleNamespace(controls=SimpleNamespace(status=status), results=None)
        ctx = SimpleNamespace(options=UIOptions.from_settings(settings), holder=holder)
        out = TrainHandlers(ctx, tab, None).start("builtin", "", None, "base")
        assert "cannot train here" in out[status] and "ZeroGPU" in out[status]
    finally:
        gpu.configure(Settings())


# ---- spaces' own scheduler client against a stand-in ZeroGPU scheduler on 127.0.0.1 ---------


class StandInScheduler:
    """ZeroGPU's device API as spaces' client speaks it: ``/schedule`` answers 429 with the
    quota left (``left`` set) or 200 with a grant; ``/release`` 200. Records each request."""

    def __init__(self, left: int | None):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from urllib.parse import parse_qs, urlparse

        self.left, self.seen = left, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                url = urlparse(self.path)
                params = {k: v[0] for k, v in parse_qs(url.query).items()}
                outer.seen.append((url.path, params))
                if url.path == "/schedule" and outer.left is not None:
                    code, body = 429, {"left": outer.left, "wait": 600}
                elif url.path == "/schedule":
                    code, body = 200, {"idle": True, "nvidiaIndex": 0, "nvidiaUUID": "GPU-0", "allowToken": "tok"}
                else:
                    code, body = 200, {}
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if url.path == "/schedule":
                    self.send_header("X-Authenticated", "regular")
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Headers(dict):
    """gradio's request headers as spaces reads them (a mapping with a __dict__)."""


def visitor_request(name: str):
    import base64
    from types import SimpleNamespace

    payload = base64.urlsafe_b64encode(json.dumps({"user": name}).encode()).decode().rstrip("=")
    return SimpleNamespace(headers=Headers({"x-ip-token": f"h.{payload}.s", "x-gradio-user": "app"}))


@pytest.fixture
def scheduler(monkeypatch, zero_settings):
    """spaces' client pointed at a stand-in scheduler; the runner's GPU functions scheduled
    through it as spaces' wrapper does before it forks its worker (the fork and CUDA patching
    need a CUDA build of torch)."""
    from spaces.config import Config
    from spaces.utils import gradio_request_var

    servers: list[StandInScheduler] = []

    def start(left: int | None) -> StandInScheduler:
        server = StandInScheduler(left)
        servers.append(server)
        monkeypatch.setattr(Config, "zero_device_api_url", server.url)
        return server

    monkeypatch.setattr(spaces_client.config, "get_config", lambda: blackwell())

    def scheduled(fn, duration):
        def run(*args):
            request = gradio_request_var().get(None)
            granted = spaces_client.schedule(
                task_id=1, request=request, duration=timedelta(seconds=duration(*args)), gpu_size=gpu.gpu_size()
            )
            try:
                yield from fn(*args)
            finally:
                spaces_client.release(granted.allowToken)

        return run

    duration = gpu.GPU_FUNCTIONS["envace_demo.ui.runner._episode"]
    monkeypatch.setattr(runner, "_episode_on_gpu", scheduled(runner._episode, duration))
    yield start
    for server in servers:
        server.close()


def test_a_refusal_from_the_scheduler_end_to_end(scheduler, scripted, zero_settings):
    import gradio as gr
    from spaces.utils import gradio_request_var

    server = scheduler(left=33)
    runner.bind(_holder(scripted(actor=[ANSWER])))
    token = gradio_request_var().set(visitor_request("ada"))
    try:
        with pytest.raises(gr.Error) as err:
            runner.run_to_end(find_task("bank", "check-balance"), EpisodeConfig(mode="none", episode_seconds=300))
    finally:
        gradio_request_var().reset(token)
    text = str(err.value.message)
    # spaces' own words (the request after its factor, twice on a whole card; the quota
    # left), then a way on.
    asked = hardware.zero_call_seconds(zero_settings)  # the longest run a call holds
    assert f"({gpu.quota_seconds(asked)}s requested vs. 33s left)" in text and "Try again in" in text
    assert "smaller N" in text and "signing in" in text
    path, params = server.seen[0]
    assert path == "/schedule" and params["durationSeconds"] == "60" and params["token"].startswith("h.")
    assert params["gpuSize"] == zero_settings.gpu_size


def test_a_granted_suite_is_scheduled_as_the_visitor(scheduler, scripted, zero_settings):
    from envace_demo.evaluation.batch import EvalTask, Job
    from spaces.utils import gradio_request_var

    server = scheduler(left=None)
    backend = scripted(actor=[ANSWER] * 6)
    runner.bind(_holder(backend))
    task = find_task("bank", "check-balance")
    jobs = [Job(EvalTask(task=task, task_id=f"t{i}", category="c"), "none", i) for i in range(2)]
    config = EpisodeConfig(mode="none", episode_seconds=zero_settings.episode_seconds)
    token = gradio_request_var().set(visitor_request("ada"))
    try:
        run_one = runner.carrying_context(lambda job: runner.run_to_end(task, config))
        records = list(run_jobs(jobs, run_one, concurrency=1))
    finally:
        gradio_request_var().reset(token)
    assert len(records) == 2 and all(r["error"] is None for r in records), records
    schedules = [params for path, params in server.seen if path == "/schedule"]
    releases = [params for path, params in server.seen if path == "/release"]
    assert len(schedules) == len(releases) == 2
    assert all(p.get("token", "").startswith("h.") for p in schedules)  # the visitor's, in the pool's threads
    scheduled = str(plan("zero-a10g", DEFAULT_GPU_MODEL, gpu_size=zero_settings.gpu_size).gpu_request_seconds)
    assert all(p["durationSeconds"] == scheduled for p in schedules)


def test_each_call_asks_for_the_size_the_plan_chose(monkeypatch):
    """spaces fixes a function's size when it is decorated, at import, before the plan has
    chosen one: the wrapper decorates one copy a size (a generator stays one) and sends each
    call to the configured size's. A recording stand-in for spaces.GPU: its ZeroGPU mode
    needs a CUDA build of torch."""
    import inspect

    made: list[str] = []

    class Recording:
        @staticmethod
        def GPU(duration, size):
            def wrap(fn):
                assert inspect.isgeneratorfunction(fn)  # spaces streams a generator function's items
                made.append(size)

                def run(*args, **kwargs):
                    yield size
                    yield from fn(*args, **kwargs)

                return run

            return wrap

    monkeypatch.setattr(gpu, "_spaces", Recording)
    monkeypatch.setattr(gpu, "GPU_FUNCTIONS", {})

    @gpu.gpu(10)
    def stream(x):
        yield x

    assert made == ["large", "xlarge"] and inspect.isgeneratorfunction(stream)
    try:
        for size in ("large", "xlarge", "large"):
            gpu.configure(Settings.from_env({**ZERO, "ENVACE_GPU_SIZE": size}))
            assert list(stream(1)) == [size, 1]
    finally:
        gpu.configure(Settings())
