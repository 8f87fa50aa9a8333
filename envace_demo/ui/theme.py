"""Theme and CSS (Gradio 6 takes both in ``launch()``)."""

from __future__ import annotations

import gradio as gr


def theme() -> gr.themes.Base:
    return gr.themes.Soft(primary_hue="indigo", secondary_hue="slate", radius_size="md")


CSS = """
.ev-header h1 { margin-bottom: 0; }
.ev-header p { margin-top: 4px; color: var(--body-text-color-subdued); }
.ev-status { padding: 8px 12px; border-radius: 8px; font-size: 0.92em; display: flex; align-items: center; gap: 8px;
  border: 1px solid var(--border-color-primary); }
.ev-status-busy { background: #eef2ff; border-color: #c7d2fe; color: #3730a3; }
/* The success colour: a passed check, a finished job. Never a failure, a time limit or an error. */
.ev-status-ok { background: #ecfdf5; border-color: #a7f3d0; color: #065f46; }
.ev-status-error { background: #fef2f2; border-color: #fecaca; color: #991b1b; }
.ev-status-warn { background: #fffbeb; border-color: #fde68a; color: #92400e; }
.ev-header-model { font-size: 0.95em; margin: 2px 0 6px; }
.ev-estimate { font-size: 0.88em; color: var(--body-text-color-subdued); padding: 2px 4px; }
.ev-note { font-size: 0.88em; color: var(--body-text-color-subdued); margin: 4px 0; }
.ev-showcase { border: 1px dashed #a5b4fc; border-radius: 10px; padding: 8px 12px; margin-bottom: 8px;
  background: #eef2ff; color: #3730a3; font-size: 0.9em; }
.ev-spinner { width: 12px; height: 12px; border: 2px solid currentColor; border-right-color: transparent;
  border-radius: 50%; display: inline-block; animation: ev-spin 0.8s linear infinite; flex: none; }
@keyframes ev-spin { to { transform: rotate(360deg); } }

.ev-schema { padding: 8px 12px; border-radius: 8px; font-size: 0.9em; }
.ev-schema-ok { background: #ecfdf5; color: #065f46; }
.ev-schema-error { background: #fef2f2; color: #991b1b; border: 1px solid #fecaca; }
.ev-loc { background: #fee2e2; padding: 1px 6px; border-radius: 4px; }

.ev-badge { display: inline-block; padding: 1px 8px; border-radius: 999px; font-size: 0.78em; font-weight: 600;
  margin-left: 4px; white-space: nowrap; vertical-align: middle; }
.ev-big { font-size: 0.9em; padding: 2px 10px; }
.ev-good { background: #dcfce7; color: #166534; }
.ev-warn { background: #fef3c7; color: #92400e; }
.ev-bad { background: #fee2e2; color: #991b1b; }
.ev-muted { background: #f1f5f9; color: #475569; }

.ev-steps { display: flex; flex-direction: column; gap: 10px; }
.ev-cols { display: grid; grid-template-columns: repeat(3, minmax(0, 1fr)); gap: 10px; }
.ev-head > div { font-weight: 700; font-size: 0.85em; text-transform: uppercase; letter-spacing: 0.04em;
  color: var(--body-text-color-subdued); padding: 0 4px; }
.ev-step { border: 1px solid var(--border-color-primary); border-radius: 10px; padding: 10px;
  background: var(--block-background-fill); }
.ev-pending { border-style: dashed; }
.ev-bar { display: flex; align-items: center; flex-wrap: wrap; gap: 4px; margin-bottom: 8px; }
.ev-num { display: inline-flex; align-items: center; justify-content: center; width: 22px; height: 22px;
  border-radius: 50%; background: #6366f1; color: white; font-size: 0.8em; font-weight: 700; }
.ev-time { margin-left: auto; font-size: 0.78em; color: var(--body-text-color-subdued); }
.ev-col { min-width: 0; }
.ev-col pre, .ev-mini pre, .ev-memory pre { margin: 0; padding: 8px; border-radius: 6px; font-size: 0.8em;
  white-space: pre-wrap; word-break: break-word; max-height: 320px; overflow: auto;
  background: var(--background-fill-secondary); }
.ev-act .ev-call { border-left: 3px solid #6366f1; }
.ev-rehearsed pre { border-left: 3px solid #a855f7; }
.ev-real pre { border-left: 3px solid #10b981; }
pre.ev-is-error { border-left-color: #ef4444 !important; }
pre.ev-live { opacity: 0.8; }
.ev-think summary { cursor: pointer; font-size: 0.82em; color: var(--body-text-color-subdued); margin-bottom: 4px; }
.ev-think pre { margin-bottom: 6px; font-style: italic; }
.ev-err { color: #b91c1c; font-size: 0.85em; margin-top: 4px; }
.ev-empty { color: var(--body-text-color-subdued); font-style: italic; font-size: 0.85em; padding: 8px; }
.ev-condensed .ev-mini { margin-top: 6px; font-size: 0.85em; }
.ev-condensed .ev-mini b { display: block; font-size: 0.8em; color: var(--body-text-color-subdued); }

.ev-card { border: 1px solid var(--border-color-primary); border-radius: 10px; padding: 12px;
  background: var(--block-background-fill); }
.ev-card-title { font-weight: 700; margin-bottom: 6px; display: flex; align-items: center; flex-wrap: wrap; gap: 4px; }
.ev-memory ul { margin: 4px 0 8px 18px; padding: 0; font-size: 0.85em; }
.ev-memory code { font-size: 0.9em; word-break: break-word; }
.ev-outcome .ev-answer-text, .ev-step-answer .ev-answer-text { white-space: pre-wrap; padding: 6px 0; }
.ev-reasons { color: #b91c1c; font-size: 0.85em; margin: 4px 0 4px 18px; }
.ev-chips { display: flex; flex-wrap: wrap; gap: 6px; margin-top: 6px; }
.ev-chip { background: var(--background-fill-secondary); border-radius: 6px; padding: 2px 8px; font-size: 0.82em; }

.ev-train-progress { display: flex; flex-direction: column; gap: 4px; font-size: 0.9em; }
.ev-train-progress progress { width: 100%; height: 10px; accent-color: #6366f1; }
"""
