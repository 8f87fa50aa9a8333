"""The benchmark's mechanics and the batching it drives.

Structure only, never wall-clock limits: the report writer and its goals, the
roofline arithmetic on a tiny random model, the per-step decode clock, and the
lockstep batching of imagined trajectories (the scheduler and
``TransformersBackend.generate_many``)."""

from __future__ import annotations

import json
import threading
import time

import pytest
from conftest import ScriptedBackend, call_text, result_text

from bench import report
from bench.decode import decode_once, roofline_fraction, roofline_tok_s, weight_bytes
from bench.memory_bw import measure_bandwidth
from envace_demo.engine import Episode, EpisodeConfig
from envace_demo.envs.registry import create
from envace_demo.events import EpisodeFinished, Generating, RehearsalFinished
from envace_demo.models.base import Constraint, Sampling
from envace_demo.prompts import CURRENT_TOOL
from envace_demo.schemas import load_tools
from envace_demo.tasks import find_task

BALANCE = call_text("get_account", {"account_id": "ACC-1003"})
ANSWER = "<think>done</think>\nThe balance of ACC-1003 is 310.25 USD."
PICK = load_tools([{"name": "pick", "parameters": {"type": "object", "properties": {"choice": {"enum": ["a", "b"]}},
                                                   "required": ["choice"]}}])


# ---- report ------------------------------------------------------------------------------


def test_report_has_every_key_its_goal_and_whether_it_is_met(tmp_path):
    figures = {"parallel_rehearsal_ratio": 1.3, "decode_roofline_fraction": 0.5, "page_served_s": 4.0,
               "peak_rss_mb": {"idle": 600.0, "parallel_n4": 900.0}}
    result = report.build(figures, {"decode": {"tok_s": 20}}, {"cpus": 2}, quick=True, notes={"grpo_step_s": "why"})
    assert set(report.KEYS) <= set(result)
    assert result["goals"]["parallel_rehearsal_ratio"] == {"goal": "≤ 1.6", "met": True}
    assert result["goals"]["decode_roofline_fraction"] == {"goal": "≥ 0.7", "met": False}
    assert result["goals"]["grpo_step_s"]["met"] is None and result["grpo_step_s"] is None
    assert result["goals"]["peak_rss_mb"] == {"goal": "report", "met": None}
    assert result["all_goals_met"] is False
    json_path, md_path = report.write(result, tmp_path)
    assert json.loads(json_path.read_text())["notes"] == {"grpo_step_s": "why"}
    table = md_path.read_text()
    for key in report.KEYS:
        assert f"| `{key}` |" in table
    assert "| `decode_roofline_fraction` | 0.5 | ≥ 0.7 | **no** |" in table


def test_all_goals_met_needs_every_goal_figure():
    met = {"parallel_rehearsal_ratio": 1.0, "decode_roofline_fraction": 0.9, "constrained_speed_ratio": 0.95,
           "page_served_s": 3.0, "model_ready_s": 9.0, "grpo_step_s": 2.0,
           "cpu_episode_p50_s": 40.0, "cpu_episode_p95_s": 90.0, "parallel_none_episode_ratio": 2.0,
           "rehearsal_valid_rate": 0.97,
           "mean_fidelity": 0.6, "placeholder_copies": 0, "heldout_success_parallel": 0.67,
           "heldout_model_fidelity": 0.8, "heldout_read_only_writes": 0, "default_run_median_s": 45.0,
           "default_run_max_s": 70.0, "worlds_outcome": 0.92, "worlds_knowable": 0.85}
    assert report.build(met, {}, {}, quick=False)["all_goals_met"] is True
    assert report.build({**met, "heldout_success_parallel": 0.5}, {}, {}, quick=False)["all_goals_met"] is False
    assert report.build({**met, "placeholder_copies": 1}, {}, {}, quick=False)["all_goals_met"] is False
    assert report.build({**met, "grpo_step_s": None}, {}, {}, quick=False)["all_goals_met"] is False
    with pytest.raises(KeyError, match="tok_per_s"):
        report.build({"tok_per_s": 3}, {}, {}, quick=False)


# ---- roofline arithmetic on a tiny random model ------------------------------------------------


def _tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from envace_demo.models.embedded import qwen3_chat_template

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = ['<tool_call>\n{"name": "pick", "arguments": {"choice": "a"}}\n</tool_call>', "<execution_result>"] * 20
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = qwen3_chat_template()
    return fast


@pytest.fixture(scope="module")
def tiny():
    from helpers import tiny_backend_over

    return tiny_backend_over(_tokenizer(), constrained=True, tie_word_embeddings=True)


def test_weight_bytes_counts_tied_embeddings_once(tiny):
    params = list(tiny.model.parameters())
    assert tiny.model.lm_head.weight.data_ptr() == tiny.model.model.embed_tokens.weight.data_ptr()
    assert weight_bytes(tiny.model) == 4 * sum(p.numel() for p in params)  # parameters() yields a tied one once
    untied = sum(p.numel() for p in tiny.model.state_dict().values() if p.is_floating_point()) * 4
    assert weight_bytes(tiny.model) < untied  # the state dict lists the tied matrix twice


def test_roofline_arithmetic():
    assert roofline_tok_s(10.0, 500_000_000) == pytest.approx(20.0)
    assert roofline_fraction(15.0, 10.0, 500_000_000) == pytest.approx(0.75)
    with pytest.raises(ValueError, match="positive"):
        roofline_tok_s(0.0, 100)


def test_decode_clock_times_each_step(tiny):
    run = decode_once(tiny, "<|im_start|>user\npick one<|im_end|>\n", max_new_tokens=6, min_new_tokens=6)
    assert run.tokens == 6 and run.step_s > 0 and run.mean_step_s > 0
    prompt = tiny.render([{"role": "user", "content": "pick"}], tools=[t.to_openai() for t in PICK])  # bench decodes text
    constrained = decode_once(tiny, prompt, 40, Constraint(role="actor", tools=tuple(PICK), require_call=True))
    assert 1 < constrained.tokens <= 40


def test_bandwidth_probe_reports_both_medians():
    bw = measure_bandwidth(size_mb=8, repeats=3)
    assert bw.read_gbs > 0 and bw.copy_gbs > 0 and bw.best_gbs == max(bw.read_gbs, bw.copy_gbs)
    assert set(bw.to_dict()) == {"read_gbs", "copy_gbs", "size_mb", "repeats", "best_gbs"}


# ---- generate_many -------------------------------------------------------------------------


def _prompts(tiny):
    messages = ["pick a", "please pick one of the two choices now", "b?"]
    return [tiny.prompt([{"role": "user", "content": m}], tools=[t.to_openai() for t in PICK]) for m in messages]


def test_generate_many_matches_one_generate_per_prompt_greedy(tiny):
    prompts = _prompts(tiny)
    greedy = Sampling(temperature=0.0, max_new_tokens=12)
    constraints = [Constraint(role="actor", tools=tuple(PICK), require_call=True), None, None]
    alone = [tiny.generate(p, greedy, constraint=c) for p, c in zip(prompts, constraints)]
    streamed: dict[int, str] = {}
    together = tiny.generate_many(prompts, greedy, constraints, on_token=lambda row, text: streamed.__setitem__(row, text))
    assert [g.text for g in together] == [g.text for g in alone]
    assert [g.prompt_tokens for g in together] == [g.prompt_tokens for g in alone]
    assert [g.token_ids for g in together] == [g.token_ids for g in alone]
    assert {row: text for row, text in streamed.items() if text} == {i: g.text for i, g in enumerate(together) if g.text}


def test_generate_many_constrains_each_row_by_its_own_grammar(tiny):
    sampling = Sampling(temperature=1.0, max_new_tokens=60, seed=3)
    constraints = [Constraint(role="actor", tools=tuple(PICK), require_call=True),
                   Constraint(role="rehearser", response_schema={"type": "object", "properties": {"ok": {"type": "boolean"}},
                                                                 "required": ["ok"]})]
    prompts = _prompts(tiny)[:2]
    gens = tiny.generate_many(prompts, sampling, constraints)
    assert gens[0].text.lstrip().startswith(("<think>", "<tool_call>")) and "<execution_result>" not in gens[0].text
    assert gens[1].text.lstrip().startswith(("<think>", "<execution_result>")) and "<tool_call>" not in gens[1].text


def test_generate_many_honours_a_set_cancel_switch(tiny):
    cancel = threading.Event()
    cancel.set()
    gens = tiny.generate_many(_prompts(tiny), Sampling(max_new_tokens=4), cancel=cancel)
    assert [g.finish_reason for g in gens] == ["cancelled"] * 3


def test_default_generate_many_loops_over_generate_with_a_seed_per_row():
    seen = []

    class Recording(ScriptedBackend):
        def generate(self, prompt, sampling, constraint=None, on_token=None, cancel=None):
            seen.append((prompt, sampling.seed, constraint))
            return super().generate(prompt, sampling, constraint, on_token, cancel)

    backend = Recording(actor=["x", "y"])
    rows = []
    prompts = [backend.prompt([{"role": "user", "content": p}]) for p in ("p1", "p2")]
    gens = backend.generate_many(prompts, Sampling(seed=5), [None, None], on_token=lambda r, t: rows.append(r))
    assert [g.text for g in gens] == ["x", "y"] and rows == [0, 1]
    assert [s[1] for s in seen] == [5, 5 + 1_000_003]


# ---- the lockstep scheduler ------------------------------------------------------------------


class Batching(ScriptedBackend):
    """A scripted backend that records each backend call: ("generate", 1) or ("many", roles).
    ``linger``: seconds each generation stays running after streaming its text (so the
    engine, which polls, sees the stream)."""

    def __init__(self, *args, linger: float = 0.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls: list[tuple] = []
        self.linger = linger

    def generate(self, prompt, sampling, constraint=None, on_token=None, cancel=None):
        if not getattr(self, "_inside_many", False):
            self.calls.append(("generate", 1))
        gen = super().generate(prompt, sampling, constraint, on_token, cancel)
        time.sleep(self.linger)
        return gen

    def generate_many(self, prompts, sampling, constraints=None, on_token=None, cancel=None):
        self.calls.append(("many", ["rehearser" if CURRENT_TOOL in p.text else "actor" for p in prompts]))
        self._inside_many = True
        try:
            return super().generate_many(prompts, sampling, constraints, on_token, cancel)
        finally:
            self._inside_many = False


def test_parallel_trajectories_advance_in_lockstep_one_batch_per_role_and_round():
    # Trajectory 2 answers at once; 0 and 1 call (differently), are rehearsed, then answer.
    other = call_text("get_account", {"account_id": "ACC-1003"}, thinking="look it up")
    backend = Batching(actor=[BALANCE, other, ANSWER, ANSWER, ANSWER, BALANCE, ANSWER],
                       rehearser=[lambda p: result_text({"balance": 1.0})] * 3, linger=0.15)
    rehearsing = {"imagined_reads": "rehearse", "imagined_others": "always"}  # the lockstep of rehearsals, on a read
    events = list(Episode(backend, find_task("bank", "check-balance"), EpisodeConfig(mode="parallel", n=3, **rehearsing),
                          create("bank")).run())
    traj = events[-1].trajectory
    assert isinstance(events[-1], EpisodeFinished)
    assert [len(r.turns) for r in traj.rehearsals] == [2, 2, 1]
    assert [r.ended for r in traj.rehearsals] == ["answer"] * 3
    assert backend.calls[:3] == [
        ("many", ["actor"] * 3),  # the first turn of the three, together
        ("many", ["rehearser", "rehearser"]),  # the two calls of trajectories 0 and 1, together
        ("many", ["actor", "actor"]),  # their second turns, together
    ]
    # Then the committed run, one generation at a time.
    assert all(len(call[1]) == 1 for call in backend.calls[3:])
    # The same prompts (the same call text) share one batch too.
    same = Batching(actor=[BALANCE, BALANCE, ANSWER, ANSWER, BALANCE, ANSWER], rehearser=[result_text({})] * 3)
    list(Episode(same, find_task("bank", "check-balance"), EpisodeConfig(mode="parallel", n=2, **rehearsing),
                 create("bank")).run())
    assert same.calls[:3] == [("many", ["actor"] * 2), ("many", ["rehearser"] * 2), ("many", ["actor"] * 2)]
    finished = [e.rehearsal.index for e in events if isinstance(e, RehearsalFinished)]
    assert sorted(finished) == [0, 1, 2] and finished[0] == 2  # the short one finished first
    streamed = {e.rehearsal for e in events if isinstance(e, Generating) and e.where == "rehearsal"}
    assert streamed == {0, 1, 2}  # each trajectory streams under its own index


def test_stop_during_lockstep_ends_every_running_trajectory():
    cancel = threading.Event()

    def stop_now(prompt):
        cancel.set()
        return result_text({"balance": 1.0})

    backend = Batching(actor=[BALANCE, BALANCE], rehearser=[stop_now, lambda p: result_text({})], delay=0.02)
    events = list(Episode(backend, find_task("bank", "check-balance"),
                          EpisodeConfig(mode="parallel", n=2, imagined_reads="rehearse", imagined_others="always"),
                          create("bank"), cancel=cancel).run())
    traj = events[-1].trajectory
    assert traj.ended == "cancelled" and traj.turns == [] and traj.memory is None
    assert [r.ended for r in traj.rehearsals] == ["cancelled", "cancelled"]
    assert sum(isinstance(e, RehearsalFinished) for e in events) == 2


def test_sequential_mode_stays_one_generation_at_a_time():
    backend = Batching(actor=[BALANCE, ANSWER, BALANCE, ANSWER, BALANCE, ANSWER],
                       rehearser=[result_text({"balance": 1.0})] * 3)
    list(Episode(backend, find_task("bank", "check-balance"), EpisodeConfig(mode="sequential", n=2), create("bank")).run())
    assert backend.calls and all(len(call[1]) == 1 for call in backend.calls)


def test_profile_sums_samples_by_kind_and_ignores_loading_and_other_threads(tmp_path):
    from bench.profile import summarize

    gen = "run (threading.py:1);generate_many (envace_demo/models/transformers_backend.py:238)"
    raw = tmp_path / "p.raw"
    raw.write_text(
        "\n".join(
            [
                f"{gen};forward (x.py:1);sdpa_attention_forward (y.py:2);Linear.forward (l.py:3) 5",  # attention first
                f"{gen};forward (x.py:1);Linear.forward (l.py:3);sgemm_kernel 7",
                f"{gen};update (cache_utils.py:1);THPVariable_cat 3",
                f"{gen};_sample (utils.py:9) 2",
                "main (bench/profile.py:1);load_backend (envace_demo/models/loader.py:5);read 11",  # loading
                "other_thread (somewhere.py:1) 13",  # not the workload
            ]
        )
        + "\n"
    )
    total, kinds = summarize(raw)
    assert total == 17
    assert kinds["attention (sdpa)"] == 5
    assert kinds["linear layers (GEMM)"] == 7
    assert kinds["KV cache growth (torch.cat per step)"] == 3
    assert kinds["the rest (Python: generate loop, engine, trainer)"] == 2


# ---- rehearsal keys (bench/rehearsal.py) ---------------------------------------------------


def _rehearsal_step(index, name, arguments, rehearsal_text=None, rehearsed=None, real=None, fidelity=None,
                    prompts=None):
    """A turn of one call."""
    from envace_demo.record import Action, CallStep, ToolCall, Turn

    step = CallStep(ToolCall(name, arguments), rehearsal_text=rehearsal_text, rehearsed=rehearsed, real=real,
                    fidelity=fidelity, rehearser_prompt=(prompts or {}).get("rehearser"))
    return Turn(index, Action(text=""), [step], actor_prompt=(prompts or {}).get("actor"))


def test_percentile_interpolates_between_order_statistics():
    from bench.rehearsal import percentile

    assert percentile([], 50) is None
    assert percentile([7.0], 95) == 7.0
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert percentile([float(i) for i in range(1, 21)], 95) == pytest.approx(19.05)


def test_read_only_tasks_are_those_whose_check_inspects_no_state():
    from bench.rehearsal import read_only

    assert read_only(find_task("bank", "check-balance").check)
    assert not read_only(find_task("bank", "deposit-cash").check)
    assert not read_only(find_task("bank", "withdraw-insufficient").check)  # asks for a withdrawal


def test_episode_stats_count_valid_rehearsals_copies_and_unrequested_writes():
    from bench.rehearsal import episode_stats
    from envace_demo.record import Rehearsal, Trajectory

    bank = create("bank")
    responses = {t.name: t.response for t in bank.tools()}
    good = {"account_id": "ACC-1003", "owner": "Ben", "type": "checking", "currency": "USD", "balance": 1.0,
            "status": "active", "daily_transfer_limit": 1.0, "transferred_today": 0.0}
    prompt = {"rehearser": 'write "code" and <what is wrong> here'}
    copied = {**good, "owner": "<what is wrong>"}
    missing = {"error": {"code": "ACCOUNT_NOT_FOUND", "message": "no account with id 'ACC-1009'"}}
    imagined = [
        _rehearsal_step(0, "get_account", {"account_id": "ACC-1003"}, result_text(copied), copied, prompts=prompt),
        _rehearsal_step(1, "get_account", {"account_id": "ACC-1003"}, result_text({"balance": 1}), {"balance": 1}),
        _rehearsal_step(2, "get_account", {"account_id": "ACC-1003"}, "no tags at all", None),
        _rehearsal_step(3, "get_account", {"account_id": "ACC-1003"},
                        result_text({"error": {"code": "ACCOUNT_NOT_FOUND", "message": "no such account"}}),
                        {"error": {"code": "ACCOUNT_NOT_FOUND", "message": "no such account"}}, prompts=prompt),
        _rehearsal_step(4, "get_account", {"account_id": "1003"}, None,
                        {"error_tool_call": {"code": "INVALID_PARAMETERS", "message": "m"}}),  # engine-decided
    ]
    committed = [
        _rehearsal_step(0, "get_account", {"account_id": "ACC-1003"}, result_text(good), good, good, 1.0),
        _rehearsal_step(1, "deposit", {"account_id": "ACC-1003", "amount": 1}, result_text(good), good,
                        {"new_balance": 1}, 0.25),
        _rehearsal_step(2, "get_account", {"account_id": "ACC-1009"}, None, missing, missing, 1.0),  # said again
    ]
    traj = Trajectory(mode="parallel", model={}, tools=[], prompt="p", seconds=12.0, success=True,
                      rehearsals=[Rehearsal(index=0, turns=imagined)], turns=committed)
    stats = episode_stats(traj, responses, bank.state_changing, is_read_only=True)
    assert (stats.rehearsed, stats.decided, stats.repeated) == (6, 1, 1)
    # valid: the declared shape (0, committed 0) and a tool's domain failure (3); not: a wrong
    # shape (1), no result block (2), and the deposit answered with get_account's shape.
    assert stats.rehearsed_valid == 3
    assert stats.placeholder_copies == ["<what is wrong>"]
    assert stats.fidelities == [1.0, 0.25, 1.0] and stats.unrequested_writes == ["deposit"]
    assert stats.model_fidelities == [1.0, 0.25]  # the engine's repeat is not the model's
    assert episode_stats(traj, responses, bank.state_changing, is_read_only=False).unrequested_writes == []


def test_aggregate_gives_every_rehearsal_key():
    from bench import rehearsal
    from bench.rehearsal import EpisodeStats, aggregate

    parallel = [
        EpisodeStats(10.0, True, rehearsed=4, rehearsed_valid=4, fidelities=[1.0, 0.5]),
        EpisodeStats(30.0, False, rehearsed=2, rehearsed_valid=1, fidelities=[0.0], unrequested_writes=["deposit"]),
        EpisodeStats(20.0, None, decided=3, placeholder_copies=["<x y>"]),
    ]
    none = [EpisodeStats(5.0, True), EpisodeStats(6.0, True), EpisodeStats(7.0, False, unrequested_writes=["w"])]
    figures, details = aggregate(parallel, none)
    assert figures == {
        "cpu_episode_p50_s": 20.0,
        "cpu_episode_p95_s": 29.0,
        "parallel_none_episode_ratio": round(20.0 / 6.0, 2),  # the medians' ratio
        "rehearsal_valid_rate": round(5 / 6, 4),
        "mean_fidelity": 0.5,
        "placeholder_copies": 1,
        "success_none": round(2 / 3, 4),
        "success_parallel": 0.5,  # the unjudged episode is left out
        "unrequested_writes": 1,
    }
    assert details["decided_by_validation"] == 3 and details["unrequested_writes_none"] == 1
    assert set(figures) <= set(report.KEYS)
    assert {t.name for t in rehearsal.tasks_for(quick=True)} == {n for names in rehearsal.QUICK_TASKS.values() for n in names}
    assert len(rehearsal.tasks_for(quick=False)) == sum(len(list(open(f"examples/{e}/tasks.jsonl"))) for e in rehearsal.ENVIRONMENTS)


def test_logged_rows_aggregate_like_the_episodes_they_came_from():
    from bench.rehearsal import EpisodeStats, aggregate, aggregate_rows

    stats = {"parallel": EpisodeStats(12.0, True, rehearsed=3, rehearsed_valid=2, decided=1, repeated=1,
                                      fidelities=[0.5, 1.0], model_fidelities=[0.5], placeholder_copies=["<a b>"],
                                      unrequested_writes=["deposit"]),
             "none": EpisodeStats(4.0, False)}
    rows = [{"mode": mode, "seconds": st.seconds, "success": st.success, "rehearsed": st.rehearsed,
             "valid": st.rehearsed_valid, "decided": st.decided, "repeated": st.repeated,
             "fidelities": st.fidelities, "model_fidelities": st.model_fidelities,
             "placeholder_copies": st.placeholder_copies, "unrequested_writes": st.unrequested_writes}
            for mode, st in stats.items()]
    assert aggregate_rows(json.loads(json.dumps(rows))) == aggregate([stats["parallel"]], [stats["none"]])


def test_the_heldout_table_sets_base_against_trained():
    side = {"eval": {"none": {"success": 0.5, "answered": 1.0, "episode_seconds": 20.0},
                     "parallel": {"success": 0.67, "answered": 0.83, "model_fidelity": 0.8, "model_rehearsed_steps": 5,
                                  "engine_written_steps": 1, "read_only_episodes_with_a_write": 1,
                                  "episode_seconds": 40.0}},
            "first_call_rehearsal_fidelity": 0.7,
            "defaults": {"median_process_s": 45.0, "max_process_s": 70.0, "all_committed": True}}
    base = {**side, "eval": {"none": {"success": 0.17}, "parallel": {"success": 0.0}}, "first_call_rehearsal_fidelity": 0.15}
    rows = report.heldout_table({"none": base, "demo-cpu": side})
    assert rows[0] == "| figure | none | demo-cpu |"
    lines = {r.split(" | ")[0].lstrip("| "): r for r in rows[2:]}
    assert lines["success, parallel rehearsal"].endswith("| 0 | 0.67 |")
    assert "0.8 (5 steps; 1 apart)" in lines["own rehearsal fidelity in episodes (model-written steps; engine-written apart)"]
    assert lines["read-only episodes with a real write"].endswith("| 0 | 1 |")
    assert lines["default runs: process seconds (median / max)"].endswith("| 45 / 70 | 45 / 70 |")
    assert "default runs: ended with an answer / succeeded (of 3)" in lines


def test_a_quick_heldout_table_shows_the_default_runs_alone():
    quick = {"demo-cpu": {"defaults": {"median_process_s": 31.0, "max_process_s": 40.0, "all_committed": True,
                                       "answered": 3, "succeeded": 2}}}
    rows = report.heldout_table(quick)
    labels = [r.split(" | ")[0].lstrip("| ") for r in rows[2:]]
    assert labels and all(label.startswith("default runs") for label in labels)
    assert rows[2].endswith("| 31 / 40 |")


def test_the_heldout_file_holds_the_heldout_example_tasks(tmp_path):
    from bench.heldout import heldout_file
    from envace_demo.tasks import load_task_file

    tasks = load_task_file(heldout_file(tmp_path))
    assert len(tasks) == 13 and {t.split for t in tasks} == {"heldout"}  # 6, then 7 of foreseeable failures
    assert {t.env for t in tasks} == {"bank", "files", "library"} and all(t.tools for t in tasks)


def test_the_worlds_section_baselines_and_table():
    """bench/worlds.py: the memorized-world lookup returns the seeded world's response of the
    closest training call; the calls it measures are committed writes with their context;
    the table sets rehearsers beside the baselines on both sides."""
    from bench import worlds

    table = worlds.lookup_table(("bank",))
    got = worlds.lookup(table, "withdraw", {"account_id": "ACC-1005", "amount": 20.0})
    assert got["error"]["code"] == "INSUFFICIENT_FUNDS"  # the seeded world: 15.50 USD
    assert worlds.lookup(table, "no_such_tool", {}) == {}
    picked = worlds.pick_calls(3)
    assert len(picked["unseen"]) == len(picked["seeded"]) == 3
    for side in picked.values():
        for s, k in side:
            assert s.steps[k].context
    side = {"outcome": 0.9, "outcome_on_failures": 0.8, "knowable": 0.85, "unknowable": 0.2}
    rows = report.worlds_table({"calls": {"unseen": 3, "seeded": 3}, "eval_worlds": [1000, 1019],
                                "rehearsers": {"new": {"unseen": side, "seeded": side}},
                                "baselines": {"lookup": {"unseen": side, "seeded": side}}})
    assert any(r.startswith("| new | 0.9 | 0.8 | 0.85 | 0.2 |") for r in rows)
    assert any(r.startswith("| baseline: lookup |") for r in rows)
    assert worlds.foresight_split([(0.95, True), (0.97, False), (0.6, True), (None, False)], 0.9) == {
        "trust_certainty": 0.9, "sure_failures": 2, "sure_failures_right": 1, "unsure_failures": 2,
        "unsure_failures_right": 1}
    side.update(worlds.foresight_split([(0.95, True), (0.5, False)], 0.9))
    rows = report.worlds_table({"calls": {}, "rehearsers": {"new": {"unseen": side}}})
    assert "new, its foreseen failures right: unseen 1 of 1 sure (certainty ≥ 0.9: trusted), 0 of 1 unsure" in rows[-1]


def test_batch_pass_ratio_times_one_pass_of_many_rows_against_one():
    """Mechanics on a tiny random Llama (no quality): both sides timed, the cache cropped back
    after each pass so every pass sees the same length."""
    from bench.parallel import batch_pass_ratio
    from helpers.tiny import tiny_llama

    figures = batch_pass_ratio(tiny_llama(vocab_size=512), rows=3, cached=40, passes=3)
    assert figures["rows"] == 3 and figures["cached"] == 40
    assert figures["one_ms"] > 0 and figures["many_ms"] > 0
    assert figures["ratio"] == pytest.approx(figures["many_ms"] / figures["one_ms"], rel=0.01)
