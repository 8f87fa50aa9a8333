"""``engine/offer.py``: which writes a request names, by the words of a tool's name and of its
description's first sentence that no read-only tool has."""

import threading

import pytest

from envace_demo.engine.commit import Committer
from envace_demo.engine.offer import names_write, tool_words
from envace_demo.envs.registry import create
from envace_demo.schemas import find_tool


def _names(env_name, tool, request):
    env = create(env_name)
    tools = env.tools()
    committer = Committer(env, None, threading.Event(), None, True, 10.0, None, None)
    return names_write(find_tool(tools, tool), request, tools, committer)


@pytest.mark.parametrize("env_name, tool, said, named", [
    ("library", "place_hold", "Do you have anything by Chinua Achebe? If so, put it on hold for me.", True),
    ("library", "place_hold", "What is Priya Nair holding at the moment? Her card is P-1100.", False),
    ("library", "place_hold", "Do you have any books by Jane Austen?", False),  # "book": every library tool's
    ("files", "create_directory", "When must I renew my passport? It's on my todo list in /notes.", False),
    ("files", "create_directory", "Can you make a new folder? What is in /notes?", True),
    ("bank", "deposit", "How much did the rent payment on ACC-1001 come to?", False),
    ("bank", "freeze_account", "Move $300 to savings, then freeze the checking account.", True),
])
def test_a_request_names_a_write(env_name, tool, said, named):
    assert _names(env_name, tool, said) is named


def test_the_words_of_a_tool():
    tool = find_tool(create("library").tools(), "place_hold")
    assert tool_words(tool, described=False) == {"place", "hold"}
    assert {"place", "hold", "book", "patron"} <= tool_words(tool)
