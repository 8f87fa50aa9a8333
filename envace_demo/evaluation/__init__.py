"""Rehearsal versus no rehearsal over task files: the paper's test-time table.

``plan`` lists the episodes (every task × mode × seed), ``run_jobs`` runs them
(K at once, resumable through a results file), ``summarize`` turns the episode
records into the per-category table with paired differences to ``none``, and
``write_report`` saves it as Markdown with plotly charts. No gradio here: the CLI's
``eval`` and the Compare tab's suite both use this package.
"""

from envace_demo.evaluation.batch import EvalTask, Job, load_eval_tasks, load_results, plan, run_jobs
from envace_demo.evaluation.table import category_of, episode_record, markdown_table, summarize

__all__ = [
    "EvalTask",
    "Job",
    "category_of",
    "episode_record",
    "load_eval_tasks",
    "load_results",
    "markdown_table",
    "plan",
    "run_jobs",
    "summarize",
]
