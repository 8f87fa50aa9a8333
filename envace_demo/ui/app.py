"""The whole app: a header, four tabs, its API endpoints (MCP tools too), one queue for model work."""

from __future__ import annotations

from typing import Any

import gradio as gr

from envace_demo.settings import Settings
from envace_demo.ui import render, runner
from envace_demo.ui.api import make_endpoints
from envace_demo.ui.common import MODEL_QUEUE, AppContext
from envace_demo.ui.compare import build_compare
from envace_demo.ui.fairness import Limits
from envace_demo.ui.holder import ModelHolder
from envace_demo.ui.model_tab import build_model_tab, model_info
from envace_demo.ui.options import UIOptions
from envace_demo.ui.playground import build_playground
from envace_demo.ui.rehearse_api import rehearse_endpoints
from envace_demo.ui.session import Session, new_session
from envace_demo.ui.theme import CSS, theme
from envace_demo.ui.train_tab import build_train_tab

CACHE_SECONDS = 3600  # public mode: how old a cached upload or download may get
TITLE = "EnvACE: world rehearsal for tool-using agents"
HEADER = f"""# {TITLE}
One policy **acts** (calls tools) and **rehearses** (predicts what the tools will answer).
Here it rehearses privately, then commits one real execution: every committed step shows
the action, the rehearsed response and the real one.
The method: [arXiv 2608.06197](https://arxiv.org/abs/2608.06197), trained as
`Team-ACE/EnvACE-Qwen3-8B`; the model that runs here is named below."""


def build_app(
    settings: Settings, holder: ModelHolder | None = None, options: UIOptions | None = None
) -> gr.Blocks:
    """The Blocks app. It starts loading the model in the background unless ``holder``
    already did, so the page serves before the model is ready."""
    options = options or UIOptions.from_settings(settings)
    if holder is None:
        holder = ModelHolder(settings)
        holder.start()
    runner.bind(holder, options)
    ctx = AppContext(settings, options, holder)

    def model_banner() -> tuple[str, str, dict, gr.Timer]:
        st = holder.status()
        redact = ctx.options.redact
        html = render.model_status_html(
            st.state, st.model, st.seconds, redact(st.error), redact(st.info), redact(st.note), st.speed
        )
        if st.plan is not None and st.plan.advice:  # the hardware plan's: what does not fit, what to pick
            html += render.status_html(st.plan.advice, "warn")
        header = render.header_model_html(st.state, redact(st.model), redact(st.info), st.adapter)
        return html, header, model_info(ctx), gr.Timer(active=st.state == "loading")

    # Public mode: gradio's file cache (uploads, downloads) emptied of files older than an hour.
    delete_cache = (CACHE_SECONDS, CACHE_SECONDS) if options.public else None
    with gr.Blocks(title=TITLE, analytics_enabled=False, delete_cache=delete_cache) as demo:
        # One Session per visitor, made on page load (a callable value would add a public endpoint).
        state = gr.State(None, delete_callback=_close)
        gr.Markdown(HEADER, elem_classes="ev-header")
        header_model = gr.HTML(render.header_model_html("loading", "the model", None, None), elem_id="header-model")
        banner = gr.HTML(render.status_html("checking the model…", "busy"), elem_id="model-banner")
        timer = gr.Timer(1.0)
        with gr.Tabs():
            with gr.Tab("Playground", id="playground"):
                build_playground(ctx, state)
            with gr.Tab("Compare", id="compare"):
                build_compare(ctx, state)
            with gr.Tab("Fine-tune", id="fine-tune"):
                applied = build_train_tab(ctx)
            with gr.Tab("Model", id="model"):
                info = build_model_tab(ctx, banner, timer)
        refresh: dict[str, Any] = {"queue": False, "api_visibility": "private"}
        demo.load(new_session, None, [state], **refresh)
        shown = [banner, header_model, info, timer]
        demo.load(model_banner, None, shown, **refresh)
        timer.tick(model_banner, None, shown, **refresh)
        # Apply and Remove change the weights that run: the header says so at once.
        applied.change(model_banner, None, shown, **refresh)
        for name, fn in {**make_endpoints(ctx), **rehearse_endpoints(ctx)}.items():
            gr.api(fn, api_name=name, **ctx.model_event())
    demo.queue(max_size=options.queue_size, default_concurrency_limit=options.concurrency)
    # Fair shares: one model job per page at a time, a few per client address (ui/fairness.py).
    # The manual queue keeps its own limit: a manual run waits on a person answering each call,
    # and must not hold the page's one model job meanwhile.
    Limits(options.client_jobs, forwarded=options.public, queues=(MODEL_QUEUE,)).install(demo)
    if options.public:
        for block in demo.blocks.values():
            if isinstance(block, (gr.File, gr.UploadButton)):
                _uploads_only(block)
    return demo


def _uploads_only(block: Any) -> None:
    """A file input that takes uploads only: gradio would fetch a URL sent in its place."""
    move = block.async_move_resource_to_block_cache

    async def refuse_urls(url_or_file_path: Any) -> Any:
        if isinstance(url_or_file_path, str) and url_or_file_path.lower().startswith(("http://", "https://")):
            raise gr.Error("file inputs take an uploaded file, not a URL")
        return await move(url_or_file_path)

    block.async_move_resource_to_block_cache = refuse_urls


def _close(session: Session | None) -> None:
    if session is not None:
        session.close()


def launch_options(settings: Settings) -> dict[str, Any]:
    """Keyword arguments for ``demo.launch``. Host and port are left to Gradio, which
    reads GRADIO_SERVER_NAME / GRADIO_SERVER_PORT (and is set up for Spaces)."""
    # A public Space shows only the project's own (redacted) messages, never a raw exception.
    # mcp_server: the API endpoints are MCP tools too (at /gradio_api/mcp), under the same caps.
    options = {"theme": theme(), "css": CSS, "show_error": not settings.public, "footer_links": ["api", "gradio"],
               "mcp_server": True}
    if settings.public:  # no upload larger than the loaders would read anyway
        options["max_file_size"] = UIOptions.from_settings(settings).input_policy.max_file_bytes
    return options
