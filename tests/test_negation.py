"""``negation.py``: a negated clause names what the user does not want done."""

from envace_demo.negation import wished


def test_a_negated_clause_is_left_out_to_the_clause_end():
    said = "Make /notes/todo.txt. If it's there, don't overwrite it; call the new one /notes/todo-2.txt"
    assert "overwrite" not in wished(said) and "/notes/todo-2.txt" in wished(said)
    assert "delete" not in wished("Move it to /archive, but never delete the original.")
    assert "replacing" not in wished("Save it without replacing anything, please.")
    assert wished("Replace everything in /notes/todo.txt") == "Replace everything in /notes/todo.txt"
    assert "freeze" in wished("Do not wait: freeze ACC-1001 now.")  # the clause ends at the colon


def test_nothing_negates_its_clause():
    assert "stolen" not in wished("Nothing was lost or stolen, I just want it frozen.")
