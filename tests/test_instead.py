"""A read refused as the wrong kind of thing is made as the read it was after
(``engine/instead.py``): the file environment names it, the engine makes it in the actor's
place, and after a folder's listing the actor picks the file, its grammar narrowed to the
files listed (scripted backend: exact outputs)."""

from conftest import call_text
from helpers.scripted import ConstrainedBackend
from envace_demo.engine import EpisodeConfig, run_episode
from envace_demo.engine.instead import named, narrowed
from envace_demo.envs.registry import create
from envace_demo.record import call_steps
from envace_demo.schemas import find_tool
from envace_demo.tasks import Task

NOTES = "/notes/meeting-2025-03-10.md"
LIST_NOTES_FILE = call_text("list_directory", {"path": NOTES})
READ_FOLDER = call_text("read_file", {"path": "/notes"})
READ_TODO = call_text("read_file", {"path": "/notes/todo.txt"})
ATTENDED = "<think></think>\nAna, Raj and Mei attended."
PASSPORT = "<think></think>\nRenew the passport before June."



def _task(env, prompt):
    return Task("t", prompt, env.tools())


def _read_run(prompt, actor):
    """One episode without rehearsal on a fresh file environment, the actor scripted: the
    record, the backend, and the (tool, path) of each call made."""
    env = create("files")
    backend = ConstrainedBackend(actor=actor)
    traj = run_episode(backend, _task(env, prompt), EpisodeConfig(mode="none"), env)
    return traj, backend, [(s.call.name, s.call.arguments["path"]) for s in call_steps(traj.turns)]


def test_the_file_environment_names_the_read_that_fits():
    env = create("files")
    folder = env.execute("read_file", {"path": "/notes"})
    file = env.execute("list_directory", {"path": NOTES})
    assert env.read_instead("read_file", {"path": "/notes"}, folder) == ("list_directory", {"path": "/notes"})
    assert env.read_instead("list_directory", {"path": NOTES}, file) == ("read_file", {"path": NOTES})
    missing = env.execute("read_file", {"path": "/nowhere.txt"})
    # A file that is not there: the root says nothing of where to look.
    assert env.read_instead("read_file", {"path": "/nowhere.txt"}, missing) is None
    made_up = env.execute("read_file", {"path": "/system/home/user1/config.txt"})
    assert env.read_instead("read_file", {"path": "/system/home/user1/config.txt"}, made_up) == (
        "list_directory", {"path": "/system"})  # the deepest folder of its path that exists
    said = ["It is in my notes, in /notes."]  # the one folder the user names comes first
    assert env.read_instead("read_file", {"path": "/system/meeting/who.txt"}, made_up, said) == (
        "list_directory", {"path": "/notes"})
    # The one file the user's words name, by its name, kind or date, is read before any listing.
    said = ["It is in my notes from the meeting, in /notes."]
    assert env.read_instead("read_file", {"path": "/system/meeting/who.txt"}, made_up, said) == (
        "read_file", {"path": "/notes/meeting-2025-03-10.md"})
    # A path the user wrote stands: its absence is the answer, not another file's content.
    todo2 = ["Make /notes/todo.txt with: hi. If it's there, save mine as /notes/todo-2.txt instead."]
    assert env.read_instead("read_file", {"path": "/notes/todo-2.txt"}, missing, todo2) != (
        "read_file", {"path": "/notes/todo.txt"})
    said = ["looking at my budget spreadsheet in projects - which month did i spend the least in?"]
    assert env.read_instead("read_file", {"path": "/projects/2025-03-13.csv"}, made_up, said) == (
        "read_file", {"path": "/projects/budget.csv"})
    assert env.read_instead("read_file", {"path": "/nowhere.txt"}, missing, ["in /nowhere"]) is None
    # Two folders named ("/notes/minutes.md into /archive"): the one the path is in.
    move = ["Move /notes/minutes.md into /archive."]
    assert env.read_instead("read_file", {"path": "/notes/minutes.md"}, missing, move) == (
        "list_directory", {"path": "/notes"})
    # A folder named in words: "my notes folder" is /notes, "the archive folder" /archive.
    said = ["Who was at the team sync? The notes should be in my notes folder."]
    assert env.read_instead("read_file", {"path": "/system/me/file.txt"}, made_up, said) == (
        "list_directory", {"path": "/notes"})
    assert env.folders_called({"archive", "new", "note"}) == {"/archive", "/notes"}
    # A named folder inside the one found is nearer: "the website folder under /projects".
    said = ["What's in the website folder under /projects? Just the file names is fine."]
    assert env.read_instead("read_file", {"path": "/projects/000a888"}, made_up, said) == (
        "list_directory", {"path": "/projects/website"})
    # A made-up path whose tail is a file that is there: that file is read.
    assert env.read_instead("read_file", {"path": "/system/projects/website/style.css"}, made_up) == (
        "read_file", {"path": "/projects/website/style.css"})
    assert env.read_instead("read_file", {"path": "/home/me/notes/todo.txt"}, made_up) == (
        "read_file", {"path": "/notes/todo.txt"})
    # A folder listed that is not there: the folder the user names, else its deepest one that is.
    gone = env.execute("list_directory", {"path": "/projects/2024-02-14/stats.csv"})
    said = ["According to my budget spreadsheet under /projects, how much did I spend in February?"]
    assert env.read_instead("list_directory", {"path": "/projects/2024-02-14/stats.csv"}, gone, said) == (
        "list_directory", {"path": "/projects"})
    assert env.read_instead("list_directory", {"path": "/archive/2024"}, gone) == ("list_directory", {"path": "/archive"})
    assert env.read_instead("list_directory", {"path": "/nowhere"}, gone) is None  # the root says nothing
    listing = env.execute("list_directory", {"path": "/"})
    assert env.read_options("read_file", "list_directory", listing) == []  # folders only: nothing to read
    notes = env.execute("list_directory", {"path": "/notes"})
    assert env.read_options("read_file", "list_directory", notes) == [{"path": NOTES}, {"path": "/notes/todo.txt"}]
    assert create("bank").read_instead("get_account", {}, folder) is None  # an environment that names none


def test_a_file_listed_as_a_folder_is_read_and_the_answer_reads_it(scripted):
    env = create("files")
    backend = scripted(actor=[LIST_NOTES_FILE, ATTENDED])
    traj = run_episode(backend, _task(env, f"Who attended the sync in {NOTES}?"), EpisodeConfig(mode="none"), env)
    refused, read = call_steps(traj.turns)
    assert refused.real["error"]["code"] == "NOT_A_DIRECTORY" and "Ana, Raj" in read.real["content"]
    assert read.call.name == "read_file" and read.call.arguments == {"path": NOTES}
    assert "NOT_A_DIRECTORY" in traj.turns[0].superseded and traj.turns[1].instead and not traj.turns[1].repaired
    assert traj.totals()["repaired_calls"] == 0  # the engine's read, not a path the rehearsal found
    assert traj.final_answer == "Ana, Raj and Mei attended."
    # The actor answered once, shown the file and not the refusal; both reads are on the record.
    answer_prompt = backend.prompts[-1]
    assert "Ana, Raj" in answer_prompt and "NOT_A_DIRECTORY" not in answer_prompt
    assert traj.totals()["real_calls"] == 2 and traj.totals()["real_errors"] == 1


def test_a_folder_read_as_a_file_is_listed_then_the_actor_picks_a_file_of_it():
    env = create("files")
    backend = ConstrainedBackend(actor=[READ_FOLDER, READ_TODO, PASSPORT])
    traj = run_episode(backend, _task(env, "When must I renew my passport? It's on my todo list in /notes."),
                       EpisodeConfig(mode="none"), env)
    names = [(s.call.name, s.call.arguments["path"]) for s in call_steps(traj.turns)]
    assert names == [("read_file", "/notes"), ("list_directory", "/notes"), ("read_file", "/notes/todo.txt")]
    assert "passport" in call_steps(traj.turns)[-1].real["content"] and traj.final_answer.endswith("June.")
    # The pick was asked with one tool, its path one of the files listed, a call required.
    (pick,) = [c for c in backend.constraints if c is not None and len(c.tools) == 1]
    assert [bool(t.instead) for t in traj.turns] == [False, True, True, False]
    assert pick.require_call and pick.tools[0].name == "read_file"
    assert pick.tools[0].parameters["properties"]["path"]["enum"] == ["/notes/todo.txt"]  # "todo list" names it


def test_a_made_up_path_is_looked_for_in_the_folder_it_may_be_in():
    made_up = call_text("read_file", {"path": "/system/home/user1/config.txt"})
    traj, backend, names = _read_run("whats the network timeout set to? it's somewhere under /system", [
        made_up, call_text("read_file", {"path": "/system/config.ini"}), "<think></think>\nThe timeout is 30."])
    assert names == [("read_file", "/system/home/user1/config.txt"), ("list_directory", "/system"),
                     ("read_file", "/system/config.ini")]
    assert "NOT_FOUND" in traj.turns[0].superseded and "may be" in traj.turns[1].instead
    (pick,) = [c for c in backend.constraints if c is not None and len(c.tools) == 1]
    assert set(pick.tools[0].parameters["properties"]["path"]["enum"]) == {"/system/config.ini", "/system/readme.txt"}
    assert traj.final_answer == "The timeout is 30."


def test_a_made_up_path_gives_way_to_the_file_the_request_names():
    made_up = call_text("read_file", {"path": "/system/home/user1/config.txt"})
    traj, _, names = _read_run("whats the network timeout set to in the system config?",
                               [made_up, "<think></think>\nThe timeout is 30."])
    assert names == [("read_file", "/system/home/user1/config.txt"), ("read_file", "/system/config.ini")]
    assert "timeout = 30" in call_steps(traj.turns)[-1].real["content"] and traj.final_answer == "The timeout is 30."


def test_a_made_up_path_around_a_real_file_reads_that_file():
    made_up = call_text("read_file", {"path": "/system/projects/website/style.css"})
    traj, _, names = _read_run("How large is the stylesheet of the website project, in bytes?",
                               [made_up, "<think></think>\nThe stylesheet is 48 bytes."])
    assert names == [("read_file", "/system/projects/website/style.css"),
                     ("read_file", "/projects/website/style.css")]
    assert traj.turns[1].calls[0].real["size"] == 48 and "may be" in traj.turns[1].instead
    assert traj.final_answer == "The stylesheet is 48 bytes."


def test_where_the_users_words_name_no_file_every_file_listed_is_on_offer():
    env = create("files")
    backend = ConstrainedBackend(actor=[READ_FOLDER, call_text("read_file", {"path": NOTES}), ATTENDED])
    traj = run_episode(backend, _task(env, "Who was at the last sync? It's somewhere in /notes."),
                       EpisodeConfig(mode="none"), env)
    (pick,) = [c for c in backend.constraints if c is not None and len(c.tools) == 1]
    assert pick.tools[0].parameters["properties"]["path"]["enum"] == [NOTES, "/notes/todo.txt"]
    assert traj.final_answer == "Ana, Raj and Mei attended."


def test_the_switch_keeps_the_refusal(scripted):
    env = create("files")
    backend = scripted(actor=[LIST_NOTES_FILE, ATTENDED])
    traj = run_episode(backend, _task(env, f"Who attended the sync in {NOTES}?"),
                       EpisodeConfig(mode="none", read_instead=False, report_failures=False), env)
    assert [s.call.name for s in call_steps(traj.turns)] == ["list_directory"]
    assert not any(t.superseded for t in traj.turns)


def test_narrowed_keeps_one_argument_to_the_values_given():
    tool = find_tool(create("files").tools(), "read_file")
    one = narrowed(tool, [{"path": "/a"}, {"path": "/b"}, {"path": "/a"}])
    assert one.parameters["properties"]["path"]["enum"] == ["/a", "/b"] and one.parameters["required"] == ["path"]
    assert tool.parameters["properties"]["path"].get("enum") is None  # the tool itself is untouched
    assert narrowed(tool, []) is None and narrowed(tool, [{"path": "/a"}, {"other": "/b"}]) is None


def test_the_files_the_users_words_name_are_the_choice_where_they_name_some():
    listed = [{"path": NOTES}, {"path": "/notes/todo.txt"}]
    assert named(listed, ["When do I renew my passport? It's on my todo list in /notes"]) == [{"path": "/notes/todo.txt"}]
    assert named(listed, ["Who came to the sync? It's somewhere in /notes"]) == listed  # none named: all
    assert named(listed, ["the meeting notes or the todo list in /notes?"]) == listed  # all named: all
    assert named([], ["todo"]) == []
