"""The demo's benchmark: ``python -m bench [--quick] [--json]``.

Every figure is a ratio or a time measured in one run on one machine (shared
machines are noisy: each is the median of repeats). ``bench/results.json`` and
``bench/RESULTS.md`` hold the last full or quick run; see ``bench/report.py`` for
the goals.
"""
