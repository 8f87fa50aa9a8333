"""The eval-speed benchmark's mechanics (the run itself is ``python -m bench.eval_speed``)."""

from bench import report
from bench.__main__ import SECTIONS, Bench
from bench.eval_speed import profile_summary


def test_the_key_is_reported_and_has_a_section():
    assert "eval_concurrency_speedup" in report.KEYS and "eval_speed" in SECTIONS
    assert callable(Bench.eval_speed)
    result = report.build({"eval_concurrency_speedup": 1.04}, {}, {}, quick=True)
    assert result["goals"]["eval_concurrency_speedup"] == {"goal": "report", "met": None}


def test_profile_samples_are_shared_out_by_kind_of_work(tmp_path):
    raw = tmp_path / "serve.txt"
    raw.write_text(
        "_run (utils.py:738);generate (utils.py:2400);forward (modeling_llama.py:300) 75\n"
        "run (uvicorn/server.py:60);_run_once (asyncio/base_events.py:1900) 20\n"
        "apply_chat_template (tokenization_utils_base.py:1600) 5\n"
        "malformed line\n"
    )
    shares = profile_summary(raw)
    assert shares == {
        "model.generate on the inference thread (forward passes)": 0.75,
        "HTTP server and event loop (request parsing, streaming chunks)": 0.2,
        "chat template and tokenizer": 0.05,
    }
