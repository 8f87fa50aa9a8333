"""Identifier arguments held to the values the conversation holds (``envace_demo.identifiers``):
the pure part on the library's own tools, the grammar it compiles to, and an episode of the
real library whose constrained actor is offered only what it can ground."""

from __future__ import annotations

import json

import pytest

from envace_demo.engine import EpisodeConfig, run_episode
from envace_demo.envs._common import tool_specs
from envace_demo.envs.registry import create
from envace_demo.identifiers import MAX_VALUES, ground, identifier_patterns, words
from envace_demo.models.base import Constraint
from envace_demo.schemas import load_tools
from envace_demo.task import Task
from conftest import call_text

LIBRARY = load_tools(tool_specs("library"))


def _tool(tools, name):
    return next(t for t in tools if t.name == name)


def test_only_named_identifiers_with_a_pattern_are_held():
    assert set(identifier_patterns(_tool(LIBRARY, "place_hold"))) == {"book_id", "patron_id"}
    assert identifier_patterns(_tool(LIBRARY, "search_catalog")) == {}
    files = load_tools(tool_specs("files"))
    assert all(identifier_patterns(t) == {} for t in files)  # paths are not identifiers: a new file is named freely
    unpatterned = load_tools([{"name": "get_user", "parameters": {"type": "object", "properties": {
        "user_id": {"type": "string"}}, "required": ["user_id"]}}])
    assert identifier_patterns(unpatterned[0]) == {}


def test_words_come_from_the_user_and_the_tools_never_the_actor_or_the_memory():
    messages = [
        {"role": "system", "content": "Rehearsal memory: BK-001 predicted"},
        {"role": "user", "content": "Hold 'Cosmos' for card P-1042."},
        {"role": "assistant", "content": '{"book_id": "BK-007"}'},
        {"role": "tool", "content": json.dumps({"results": [{"book_id": "BK-037", "title": "Cosmos"}]})},
    ]
    found = words(messages)
    assert "P-1042" in found and "BK-037" in found  # the sentence's full stop dropped
    assert "BK-001" not in found and "BK-007" not in found


def test_a_tool_whose_required_identifier_nothing_names_is_not_offered():
    messages = [{"role": "user", "content": "Reserve Cosmos for library card P-1042."}]
    offered = {t.name: t for t in ground(LIBRARY, messages)}
    assert set(offered) == {"search_catalog", "list_books", "get_patron"}  # the card is named, no book id yet
    messages.append({"role": "tool", "content": '{"results": [{"book_id": "BK-037"}, {"book_id": "BK-036"}]}'})
    offered = {t.name: t for t in ground(LIBRARY, messages)}
    hold = offered["place_hold"].parameters["properties"]
    assert hold["book_id"]["enum"] == ["BK-037", "BK-036"] and "pattern" not in hold["book_id"]
    assert hold["patron_id"]["enum"] == ["P-1042"]
    assert _tool(LIBRARY, "place_hold").parameters["properties"]["book_id"].get("enum") is None  # not changed in place


def test_the_latest_values_are_kept_and_nothing_offered_means_the_tools_as_given():
    many = " ".join(f"BK-{i:03d}" for i in range(1, 41))
    hold = {t.name: t for t in ground(LIBRARY, [{"role": "user", "content": f"{many} P-1042"}])}["place_hold"]
    assert hold.parameters["properties"]["book_id"]["enum"] == [f"BK-{i:03d}" for i in range(41 - MAX_VALUES, 41)]
    only_hold = [_tool(LIBRARY, "place_hold")]
    assert ground(only_hold, [{"role": "user", "content": "hold Dune"}]) == tuple(only_hold)


def test_an_optional_identifier_nothing_names_is_not_passed():
    tools = load_tools([{"name": "list_orders", "parameters": {"type": "object", "properties": {
        "customer_id": {"type": "string", "pattern": "^C-[0-9]+$"}, "limit": {"type": "integer"}}}}])
    (tool,) = ground(tools, [{"role": "user", "content": "my last orders"}])
    assert set(tool.parameters["properties"]) == {"limit"}


def test_the_grounded_grammar_admits_only_the_found_id(tokenizer_grammars):
    import xgrammar as xgr

    messages = [{"role": "user", "content": "Reserve it for P-1042."},
                {"role": "tool", "content": '{"results": [{"book_id": "BK-037"}]}'}]
    constraint = Constraint(role="actor", tools=ground(LIBRARY, messages), require_call=True)

    def accepts(name, arguments):
        matcher = xgr.GrammarMatcher(tokenizer_grammars.compile(constraint))
        text = "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"
        return matcher.accept_string(text) and matcher.accept_token(tokenizer_grammars.stop_token_ids[0])

    assert accepts("place_hold", {"book_id": "BK-037", "patron_id": "P-1042"})
    assert not accepts("place_hold", {"book_id": "BK-007", "patron_id": "P-1042"})


@pytest.fixture(scope="module")
def tokenizer_grammars(cache_dir):
    from transformers import AutoTokenizer

    from envace_demo.models.embedded import ensure_embedded_model
    from envace_demo.models.grammar import GrammarCache

    tokenizer = AutoTokenizer.from_pretrained(ensure_embedded_model(cache_dir))
    return GrammarCache(tokenizer, vocab_size=len(tokenizer), stop_token_ids=[tokenizer.eos_token_id])


@pytest.mark.parametrize("grounded", [True, False])
def test_an_episode_offers_the_hold_once_a_search_found_the_id(scripted, grounded):
    seen = []

    class Constrained(type(scripted(actor=[]))):
        supports_constraints = True

        def generate(self, prompt, sampling, constraint=None, on_token=None, cancel=None):
            if constraint is not None and constraint.role == "actor":
                seen.append({t.name for t in constraint.tools})
            return super().generate(prompt, sampling, constraint, on_token, cancel)

    backend = Constrained(actor=[call_text("search_catalog", {"query": "Cosmos"}),
                                 call_text("place_hold", {"book_id": "BK-037", "patron_id": "P-1042"}),
                                 "Cosmos is on hold for P-1042."])
    task = Task("hold-cosmos", "Reserve Cosmos for library card P-1042.", LIBRARY, env="library",
                check={"state": [{"path": "patrons.P-1042.holds", "equals": ["BK-037"]}]})
    traj = run_episode(backend, task, EpisodeConfig(mode="none", max_steps=2, grounded_ids=grounded), create("library"))
    assert traj.success is True
    first = {"search_catalog", "list_books", "get_patron"} if grounded else {t.name for t in LIBRARY}
    assert seen[0] == first and "place_hold" in seen[1]


def test_an_identifier_written_in_other_case_is_offered_in_the_declared_shape():
    """ "place a hold on BK-031 for card p-1042": held to ids as written, the actor found no
    patron id and placed nothing."""
    messages = [{"role": "user", "content": "place a hold on bk-031 for card p-1042 thx"}]
    hold = _tool(ground(LIBRARY, messages), "place_hold")
    assert hold.parameters["properties"]["patron_id"]["enum"] == ["P-1042"]
    assert hold.parameters["properties"]["book_id"]["enum"] == ["BK-031"]
    assert "place_hold" not in {t.name for t in ground(LIBRARY, [{"role": "user", "content": "hold q-1 for me"}])}
