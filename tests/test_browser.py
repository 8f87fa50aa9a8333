"""A real browser on the real app: Playwright driving Debian's chromium.

Loads the page, pastes a schema, runs (parallel, N=1, one actor turn), sees the three
columns filled, then pastes an invalid schema and sees the located error beside the
editor, with the user's message untouched; then Stop halts a run mid-generation; a
follow-up goes on from a finished run.
A second app with its own defaults: a first visit sees the recorded showcase before
anything runs, then the default example runs to its end within the fitted budget.
Screenshots go to tests/artifacts/.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from helpers import LaunchedApp

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]
PROMPT = "What is the current balance of account ACC-1003?"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install -y chromium)"
    ),
]


def _one_tool() -> str:
    """The bank's get_account alone: a pasted schema of its own, and a short prompt."""
    tools = json.loads((ROOT / "examples" / "bank" / "tools.json").read_text(encoding="utf-8"))
    return json.dumps([t for t in tools if t["function"]["name"] == "get_account"], indent=2)


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    launched = LaunchedApp(tmp_path_factory.mktemp("browser-app") / "app.log")
    try:
        yield launched
    finally:
        launched.stop()


@pytest.fixture(scope="module")
def browser():
    """One Playwright and one browser for the module: sync Playwright cannot be nested."""
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def page(app, browser):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(app.url)
    yield page
    page.close()


def _bank_tools() -> str:
    return (ROOT / "examples" / "bank" / "tools.json").read_text(encoding="utf-8")


def paste_schema(page, text: str) -> None:
    paste_schema_into(page, "#schema-editor", text)


def paste_schema_into(page, editor_id: str, text: str) -> None:
    editor = page.locator(f"{editor_id} .cm-content")
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(text)  # one input event, as a paste makes


def test_run_fills_the_three_columns_then_an_invalid_schema_shows_its_location(page):
    expect = pytest.importorskip("playwright.sync_api").expect
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.wait_for_selector("#model-banner .ev-status-info", timeout=300_000)

    paste_schema(page, _one_tool())
    status = page.locator("#schema-status")
    # The example's status is already "ok": wait for the pasted schema's own summary.
    expect(status.locator(".ev-schema-ok")).to_contain_text("1 tool", timeout=30_000)
    assert "get_account" in status.inner_text()

    message = page.locator("#user-message textarea")
    message.fill(PROMPT)
    n = page.locator("#rehearsal-n input[type=number]")
    n.fill("1")
    n.press("Enter")
    page.click("#run-button")

    # Streams: the rehearsal panel appears before the committed run is done.
    page.locator("#rehearsals").get_by_text("Rehearsal 1").first.wait_for(timeout=600_000)
    page.locator("#outcome .ev-outcome").wait_for(timeout=900_000)
    page.screenshot(path=str(ARTIFACTS / "browser-run.png"), full_page=True)

    step = page.locator("#committed-steps .ev-step").first
    action = step.locator(".ev-col.ev-act pre.ev-call").inner_text()
    rehearsed = step.locator(".ev-col.ev-rehearsed pre").inner_text()
    real = step.locator(".ev-col.ev-real pre").inner_text()
    assert '"name": "get_account"' in action
    assert json.loads(rehearsed) is not None  # the model's prediction, as JSON
    assert json.loads(real).get("account_id") or "error" in json.loads(real)  # the bank's real answer
    assert step.locator(".ev-badge", has_text="fidelity").count() == 1
    assert step.locator(".ev-badge", has_text="arguments").count() == 1
    expect(page.locator("#download")).to_be_enabled(timeout=30_000)  # enabled by the run's last update

    invalid = json.loads(_one_tool())
    invalid[0]["function"]["parameters"]["properties"]["account_id"]["type"] = "strng"
    invalid = json.dumps(invalid, indent=2)
    paste_schema(page, invalid)
    error = page.locator("#schema-status .ev-schema-error")
    error.wait_for(timeout=30_000)
    assert "tools[0].function.parameters.properties.account_id.type" in error.inner_text()
    assert "strng" in error.inner_text()
    page.click("#run-button")  # refused: the run never starts, nothing typed is lost
    page.locator("#run-status .ev-status-error").wait_for(timeout=30_000)
    assert "fix the schema" in page.locator("#run-status").inner_text()
    assert message.input_value() == PROMPT
    assert '"strng"' in page.locator("#schema-editor .cm-content").inner_text()
    page.screenshot(path=str(ARTIFACTS / "browser-invalid-schema.png"), full_page=True)


@pytest.mark.timing
def test_stop_cancels_a_running_episode_promptly(page):
    page.wait_for_selector("#model-banner .ev-status-info", timeout=300_000)
    page.get_by_role("radio", name="files").check()  # a fresh example: schema, environment, message
    page.locator("#schema-status .ev-schema-ok").wait_for(timeout=30_000)
    page.click("#run-button")
    page.locator("#rehearsals").get_by_text("is writing").first.wait_for(timeout=600_000)
    page.click("#stop-button")
    started = time.monotonic()
    page.locator("#outcome .ev-outcome").wait_for(timeout=60_000)
    assert time.monotonic() - started < 10  # a generation under way is halted, not waited for
    assert "ended: cancelled" in page.locator("#outcome").inner_text()
    assert "cancelled" in page.locator("#run-status").inner_text()
    # Stopped is not success: the failure colour, on the status and on the outcome.
    assert page.locator("#run-status .ev-status-error").count() == 1
    assert page.locator("#outcome .ev-outcome").get_attribute("data-kind") == "error"


@pytest.mark.heavy
def test_fine_tune_draws_per_role_curves_live_then_applies_the_adapter(page, tmp_path):
    """A two-step run, groups of two, on the user's own tasks (the bank's tools in the
    editor, an uploaded JSONL of two training drills and one held out): curves appear
    while the run is still going, one line per role; then the before/after table, the
    download and Apply."""
    drills = (ROOT / "envace_demo" / "train" / "data" / "bank_drills.jsonl").read_text(encoding="utf-8")
    records = [json.loads(line) for line in drills.splitlines() if line.strip()]
    picked = [r for r in records if r["split"] == "train"][:2] + [r for r in records if r["split"] == "heldout"][:1]
    tasks = tmp_path / "bank-three.jsonl"
    tasks.write_text("\n".join(json.dumps(r) for r in picked) + "\n", encoding="utf-8")

    page.wait_for_selector("#model-banner .ev-status-info", timeout=300_000)
    page.get_by_role("tab", name="Fine-tune").click()
    page.locator("#train-source input").click()
    page.get_by_role("option", name="your own: tools + a JSONL of tasks").click()
    page.locator("#train-tools .cm-content").wait_for(timeout=30_000)  # choosing "own" opens its box
    paste_schema_into(page, "#train-tools", _bank_tools())
    page.locator("#train-tasks input[type=file]").set_input_files(str(tasks))
    for control, value in (("#train-steps", "2"), ("#train-group", "2")):
        box = page.locator(f"{control} input[type=number]")
        box.fill(value)
        box.press("Enter")
    page.click("#train-button")
    page.locator("#train-status .ev-status-busy").wait_for(timeout=30_000)

    # Live: the first step's points are drawn while the progress bar is still there.
    page.locator("#train-curves .scatterlayer .trace").first.wait_for(timeout=900_000)
    assert page.locator("#train-progress progress").count() == 1
    legend = page.locator("#train-curves .legendtext").all_text_contents()  # SVG: no inner_text
    assert {"actor", "rehearser"} <= set(legend)
    page.screenshot(path=str(ARTIFACTS / "browser-fine-tune-live.png"), full_page=True)

    page.locator("#train-status .ev-status-ok").wait_for(timeout=900_000)
    assert "done: 2 steps" in page.locator("#train-status").inner_text()
    table = page.locator("#train-eval").inner_text()
    assert "success without rehearsal" in table and "%" in table
    page.locator("#train-apply:not([disabled])").wait_for(timeout=30_000)
    page.click("#train-apply")
    page.locator("#train-applied .ev-status-ok").wait_for(timeout=120_000)
    assert "with the adapter of run-" in page.locator("#train-applied").inner_text()
    pytest.importorskip("playwright.sync_api").expect(page.locator("#header-model")).to_contain_text(
        "adapter: run-", timeout=30_000
    )  # the header says the weights that run are fine-tuned
    page.screenshot(path=str(ARTIFACTS / "browser-fine-tune-done.png"), full_page=True)
    page.get_by_role("button", name="Remove the adapter").click()  # the module's app is shared
    page.locator("#train-applied", has_text="removed").wait_for(timeout=120_000)
    pytest.importorskip("playwright.sync_api").expect(page.locator("#header-model")).to_contain_text(
        "no adapter", timeout=30_000
    )


def test_manual_environment_waits_for_the_typed_response(page):
    """Environment "manual": the committed call waits; the box shows it with the rehearsed
    response; what is typed and sent becomes the step's real response."""
    page.wait_for_selector("#model-banner .ev-status-info", timeout=300_000)
    page.get_by_role("tab", name="Playground").click()
    page.get_by_role("radio", name="bank").check()  # the bank's tools and request
    page.locator("#schema-status .ev-schema-ok").wait_for(timeout=30_000)
    page.locator("#environment input").click()
    page.get_by_role("option", name="manual: you type the real response of each call").click()
    page.get_by_role("radio", name="none", exact=True).check()  # no rehearsals: straight to the call
    # Its run waits on a person, in a queue of its own: its own Run button stands in for Run.
    expect = pytest.importorskip("playwright.sync_api").expect
    expect(page.locator("#run-button")).to_be_hidden(timeout=30_000)
    page.click("#run-manual-button")

    box = page.locator("#manual-box")
    box.locator("#manual-call").get_by_text("waits for its real response").wait_for(timeout=600_000)
    assert '"name"' in box.locator("#manual-call pre").inner_text()
    editor = page.locator("#manual-response .cm-content")
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text('{"typed_by": "a person", "balance": 4242.5}')
    page.screenshot(path=str(ARTIFACTS / "browser-manual-waiting.png"), full_page=True)
    page.click("#manual-send")
    page.locator("#outcome .ev-outcome").wait_for(timeout=600_000)
    real = page.locator("#committed-steps .ev-step").first.locator(".ev-col.ev-real pre").inner_text()
    assert json.loads(real) == {"typed_by": "a person", "balance": 4242.5}
    assert not box.is_visible()
    page.locator("#environment input").click()  # the bank again: Run is back for the tests after
    page.get_by_role("option", name="bank: ").click()
    expect(page.locator("#run-button")).to_be_visible(timeout=30_000)
    expect(page.locator("#run-manual-button")).to_be_hidden()


def test_a_follow_up_goes_on_from_the_finished_run(page):
    """Run on the bank (mode none), then the next user message from the follow-up box: it runs
    on the state the first left, and the steps show each user message above its own steps."""
    expect = pytest.importorskip("playwright.sync_api").expect
    page.wait_for_selector("#model-banner .ev-status-info", timeout=300_000)
    page.get_by_role("tab", name="Playground").click()
    page.get_by_role("radio", name="bank").check()
    page.locator("#schema-status .ev-schema-ok").wait_for(timeout=30_000)
    page.locator("#user-message textarea").fill(PROMPT)
    page.get_by_role("radio", name="none", exact=True).check()  # no rehearsals: the shortest round trip
    page.click("#run-button")
    send = page.locator("#follow-up-send")
    expect(send).to_be_enabled(timeout=600_000)  # the run ended, and its conversation may go on
    assert page.locator("#committed-steps .ev-user-turn").count() == 0  # one message: no headers yet

    follow = "And what is the balance of ACC-1001?"
    box = page.locator("#follow-up-message textarea")
    box.fill(follow)
    send.click()
    expect(send).to_be_disabled(timeout=10_000)
    expect(box).to_have_value("", timeout=600_000)  # sent and answered: it heads its own steps now
    expect(send).to_be_enabled(timeout=30_000)
    headers = page.locator("#committed-steps .ev-user-turn")
    assert headers.count() == 2
    assert PROMPT in headers.nth(0).inner_text() and follow in headers.nth(1).inner_text()
    steps = page.locator("#committed-steps")
    assert steps.locator('.ev-user-turn[data-user-turn="1"] ~ .ev-step').count() >= 1  # its steps below it
    assert "message 3 of this conversation" in page.locator("#follow-up-note").inner_text()
    page.screenshot(path=str(ARTIFACTS / "browser-follow-up.png"), full_page=True)


# ---- the page as a first-time visitor finds it: default settings, fitted budget ------------


@pytest.fixture(scope="module")
def default_app(tmp_path_factory):
    """The app with its own defaults: no step or token settings, so the budget fitted to
    the model's measured speed applies (empty values count as unset)."""
    launched = LaunchedApp(
        tmp_path_factory.mktemp("default-app") / "app.log",
        extra_env={"ENVACE_MAX_NEW_TOKENS": "", "ENVACE_MAX_STEPS": ""},
    )
    try:
        yield launched
    finally:
        launched.stop()


@pytest.fixture(scope="module")
def first_page(default_app, browser):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    yield page
    page.close()


@pytest.mark.timing
def test_a_first_visit_shows_the_showcase_then_the_default_run_ends_within_its_budget(default_app, first_page):
    expect = pytest.importorskip("playwright.sync_api").expect
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page = first_page
    page.goto(default_app.url)

    # Before anything runs: the recorded showcase fills the panels, and names its model.
    note = page.locator("#showcase .ev-showcase")
    expect(note).to_be_visible(timeout=60_000)
    assert "Nothing has run yet" in note.inner_text() and "SmolLM2-135M" in note.inner_text()
    assert page.locator("#committed-steps .ev-step").count() >= 1
    page.locator("#rehearsals").get_by_text("Rehearsal 1").first.wait_for(timeout=30_000)
    assert page.locator("#outcome .ev-outcome").count() == 1
    assert "ready: press Run" in page.locator("#run-status").inner_text()
    page.screenshot(path=str(ARTIFACTS / "browser-first-look.png"), full_page=True)

    # The header names the model that runs, not the 8B model the method was trained as.
    page.wait_for_selector("#model-banner .ev-status-info", timeout=300_000)
    header = page.locator("#header-model")
    expect(header).to_contain_text("embedded (SmolLM2-135M-Instruct)", timeout=30_000)
    # The embedded model's default adapter, trained by the project's recipe, is named beside it.
    assert "demo-cpu" in header.inner_text() and "EnvACE-Qwen3-8B" not in header.inner_text()

    # The estimate, once the model is timed; the budget it promises is the run's limit.
    estimate = page.locator("#run-estimate .ev-estimate[data-seconds]")
    estimate.wait_for(timeout=60_000)
    text = estimate.inner_text()
    limit = float(text.split("time limit ")[1].split(" s")[0])
    assert "tokens/s" in text and int(estimate.get_attribute("data-seconds")) > 0

    run = page.locator("#run-button")
    started = time.monotonic()
    run.click()
    expect(run).to_be_disabled(timeout=10_000)  # no second run of the same page meanwhile
    expect(note).to_have_count(0, timeout=30_000)  # the showcase gives way to the live run
    expect(page.locator("#run-status")).to_contain_text("tokens/s", timeout=int(limit * 1000))
    outcome = page.locator("#outcome .ev-outcome")
    outcome.wait_for(timeout=int((limit + 60) * 1000))
    took = time.monotonic() - started
    page.screenshot(path=str(ARTIFACTS / "browser-default-run.png"), full_page=True)
    expect(run).to_be_enabled(timeout=10_000)

    result = outcome.inner_text()
    assert "ended: time_limit" not in result and took <= limit + 15  # ended within its budget
    # The colour tells the verdict: green only when the example's check passed.
    succeeded = "task succeeded" in result
    assert (outcome.get_attribute("data-kind") == "ok") is succeeded
    assert (page.locator("#run-status .ev-status-ok").count() == 1) is succeeded
