"""The episode's limits: the rehearsals' share of its time, the reserve of a committed
call, the grace given a backend told to stop, and how a cut is said in the record."""

from __future__ import annotations

from envace_demo.models.base import Sampling

# Why rehearsals end when their share of the episode's time is spent.
REHEARSAL_TIME = "rehearsal_time"
# An imagined run that ended once its first write was rehearsed (``EpisodeConfig.imagined_until``).
FIRST_WRITE = "first_write"
# An imagined run that ended on a turn repeating reads it had made, with no write since.
REPEATED_READ = "repeated_read"
# A committed call's rehearsal ends this share of the episode's limit before the limit:
# the real call, and the answer after it, keep that time.
CALL_RESERVE = 0.1
# The characters an imagined run's answer may hold: enough to see that it answered (the
# committed actor reads which calls the rehearsals made, never their answers).
IMAGINED_ANSWER_CHARS = 1
# A committed answer drawn with the rehearsal memory in view is set aside and worded again
# (``EpisodeConfig.answer_without_memory``): its first words are all that is drawn. Room for
# any first token, so the grammar leaves the choice between a call and an answer as it was.
DRAFT_ANSWER_CHARS = 24
# How an interrupted step names the reason the episode (or the rehearsals) stopped.
STOP_WORDS = {
    "time_limit": "the time limit came",
    "cancelled": "stopped",
    REHEARSAL_TIME: "the rehearsal time ran out",
}
# A backend that ignores its cancel switch is abandoned this long after being told to stop.
HALT_GRACE_S = 5.0


def cut_by(sampling: Sampling) -> str:
    """Which budget cut a generation short."""
    think = f", {sampling.think_tokens} of them for reasoning" if sampling.think_tokens else ""
    return f"cut by the new-token limit (max_new_tokens={sampling.max_new_tokens}{think})"
