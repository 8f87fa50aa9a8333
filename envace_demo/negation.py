"""What the user wished done, without what they asked not to be done.

"If a file with that name is already there, don't overwrite it; call the new one
/notes/todo-2.txt" names overwriting as a thing to avoid. Read as a wish, it let the engine
replace the user's todo list (the foreseen failure asked for ``overwrite``, and the request
held the word). A negated clause, from its negation to the clause's end, is left out before
the engine weighs which writes or arguments the request names."""

from __future__ import annotations

import re

_NEGATED = re.compile(r"\b(?:do\s*n[o']t|dont|never|must\s*n[o']t|should\s*n[o']t|without|no need to|not|nothing"
                      r"|nobody|no one|neither)\b"
                      r"[^.,;:!?\n]*", re.IGNORECASE)


def wished(text: str) -> str:
    """``text`` with each negated clause left out ("don't overwrite it", "never delete ...",
    "nothing was lost or stolen")."""
    return _NEGATED.sub(" ", text)
