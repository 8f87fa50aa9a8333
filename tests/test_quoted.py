"""Arguments that quote the user (``quoted.py``): a catalog search's words are runs of the
user's own words, in the actor's grammar; the prompt is untouched."""

from envace_demo.engine import EpisodeConfig
from envace_demo.engine.offer import offered
from envace_demo.engine.commit import Committer
from envace_demo.envs.registry import create
from envace_demo.identifiers import identifier_patterns
from envace_demo.quoted import MAX_WORDS, quote, runs
from envace_demo.schemas import find_tool

LIBRARY = create("library")
IDS = [p for t in LIBRARY.tools() for p in identifier_patterns(t).values()]


def _user(*texts):
    return [{"role": "user", "content": t} for t in texts]


def test_runs_are_the_users_words_within_a_sentence_and_never_an_identifier():
    found = runs(_user("Hold A Brief History of Time for patron P-1042, please."), IDS)
    assert "A Brief History of Time" in found and "Brief History" in found
    assert not any("P-1042" in r for r in found)  # a card number is not a title
    assert not any("please" in r and "Time" in r for r in found)  # the identifier broke the run
    assert all(len(r.split()) <= MAX_WORDS for r in found)
    two = runs(_user("Is Dune in? I'd like Emma too."), IDS)
    assert "Dune" in two and "Emma" in two and not any("in I'd" in r for r in two)  # no run across a sentence's end
    assert runs(_user("first message", "Kazuo Ishiguro"), IDS)[0] == "Kazuo Ishiguro"  # the latest message first
    assert runs([{"role": "tool", "content": "Dracula"}], IDS) == []  # only what the user said
    # A possessive's "'s" is left out: every word of a search must match the author.
    mandela = runs(_user("Where would I find Nelson Mandela's autobiography?"), IDS)
    assert "Nelson Mandela" in mandela and not any("'s" in r for r in mandela)


def test_a_run_never_opens_with_a_framing_word_nor_ends_on_a_link():
    found = runs(_user("Does the library have anything by Toni Morrison?"), IDS)
    assert "Toni Morrison" in found
    assert not any(r.startswith(("Does", "by ")) or r.endswith((" by", " have")) for r in found)
    titles = runs(_user("Hold And Then There Were None, and The Road."), IDS)
    assert "And Then There Were None" in titles and "The Road" in titles  # an article or a link may open a title


def test_the_search_is_held_to_runs_and_other_tools_stay_as_declared():
    tools = LIBRARY.tools()
    quoted = quote(tools, _user("Does the library own any books by Kazuo Ishiguro?"), lambda t: LIBRARY.quoting(t.name))
    search = find_tool(quoted, "search_catalog")
    assert "Kazuo Ishiguro" in search.parameters["properties"]["query"]["enum"]
    assert all(len(v) <= 100 for v in search.parameters["properties"]["query"]["enum"])  # the declared maxLength
    assert find_tool(tools, "search_catalog").parameters["properties"]["query"].get("enum") is None  # a copy
    assert [t for t in quoted if t.name != "search_catalog"] == [t for t in tools if t.name != "search_catalog"]
    assert create("files").quoting("read_file") == () and LIBRARY.quoting("get_book") == ()


class _Prompt:
    def __init__(self, messages):
        self.messages = messages


def test_the_actors_grammar_offers_the_quoted_search_and_the_switch_turns_it_off():
    committer = Committer(LIBRARY, None, None, None, True, 1.0, str)
    prompt = _Prompt(_user("Put Dune on hold for P-1100."))
    on = find_tool(offered(LIBRARY.tools(), prompt, False, EpisodeConfig(), committer), "search_catalog")
    assert "Dune" in on.parameters["properties"]["query"]["enum"]
    assert not any("P-1100" in v for v in on.parameters["properties"]["query"]["enum"])  # with grounded ids too
    off = find_tool(offered(LIBRARY.tools(), prompt, False, EpisodeConfig(quoted_args=False), committer),
                    "search_catalog")
    assert "enum" not in off.parameters["properties"]["query"]
