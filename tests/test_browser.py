"""A real browser on the real app: Playwright driving Debian's chromium.

Loads the page, pastes a schema, runs (parallel, N=1, one actor turn), sees the three
columns filled, then pastes an invalid schema and sees the located error beside the
editor, with the user's message untouched; then Stop halts a run mid-generation.
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
def page(app):
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(app.url)
            yield page
        finally:
            browser.close()


def paste_schema(page, text: str) -> None:
    editor = page.locator("#schema-editor .cm-content")
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(text)  # one input event, as a paste makes


def test_run_fills_the_three_columns_then_an_invalid_schema_shows_its_location(page):
    expect = pytest.importorskip("playwright.sync_api").expect
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.wait_for_selector("#model-banner .ev-status-ok", timeout=300_000)

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
    assert page.locator("#download").is_enabled()

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


def test_stop_cancels_a_running_episode_promptly(page):
    page.wait_for_selector("#model-banner .ev-status-ok", timeout=300_000)
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


def test_fine_tune_draws_per_role_curves_live_then_applies_the_adapter(page):
    """A two-step run on the bank drills: curves appear while the run is still going,
    one line per role; then the before/after table, the download and Apply."""
    page.wait_for_selector("#model-banner .ev-status-ok", timeout=300_000)
    page.get_by_role("tab", name="Fine-tune").click()
    steps = page.locator("#train-steps input[type=number]")
    steps.fill("2")
    steps.press("Enter")
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
    page.screenshot(path=str(ARTIFACTS / "browser-fine-tune-done.png"), full_page=True)
    page.get_by_role("button", name="Remove the adapter").click()  # the module's app is shared
    page.locator("#train-applied", has_text="removed").wait_for(timeout=120_000)


def test_manual_environment_waits_for_the_typed_response(page):
    """Environment "manual": the committed call waits; the box shows it with the rehearsed
    response; what is typed and sent becomes the step's real response."""
    page.wait_for_selector("#model-banner .ev-status-ok", timeout=300_000)
    page.get_by_role("tab", name="Playground").click()
    page.get_by_role("radio", name="bank").check()  # the bank's tools and request
    page.locator("#schema-status .ev-schema-ok").wait_for(timeout=30_000)
    page.locator("#environment input").click()
    page.get_by_role("option", name="manual: you type the real response of each call").click()
    page.get_by_role("radio", name="none", exact=True).check()  # no rehearsals: straight to the call
    page.click("#run-button")

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
