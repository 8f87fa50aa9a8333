"""The episode engine: act, rehearse, commit.

``Episode(...).run()`` is a generator of typed events (``envace_demo.events``);
the last one carries the finished ``Trajectory``. What each mode runs is the mode
policy (``envace_demo.modes``); the imagined trajectories are driven by the lockstep
scheduler (``envace_demo.scheduler``); every model call and real tool call is a
supervised call (``envace_demo.supervise``).

Time: the rehearsals may spend ``rehearsal_share`` of the episode's limit; past it they
are cut (what they reached still feeds the memory) and the committed run goes on with the
rest, its own reserve. A committed call's rehearsal gives way to the real call when the
limit draws near (``CALL_RESERVE``), so a run whose rehearsals are slow still commits.

Modules, one concern each: :mod:`.episode` (the conversation: user turns in order, the
rehearsals of each, the verdict), :mod:`.acting` (one trajectory's turn loop and the phases
of each call), :mod:`.rehearsal` (one call's rehearsal, its fidelity, the memory the actor
reads), :mod:`.commit` (context reads, the hold, the real call), :mod:`.answers` (answer
grounding), :mod:`.limits` (time shares and cuts) and :mod:`.config` (``EpisodeConfig``).
"""

from __future__ import annotations

from envace_demo.engine.commit import Executor, known_reads
from envace_demo.engine.config import MEMORY_VIEWS, EpisodeConfig
from envace_demo.engine.episode import Episode, run_episode
from envace_demo.engine.limits import CALL_RESERVE, REHEARSAL_TIME
from envace_demo.modes import MODES
from envace_demo.validation import check_arguments, validation_error

__all__ = [
    "CALL_RESERVE", "MEMORY_VIEWS", "MODES", "REHEARSAL_TIME", "Episode", "EpisodeConfig", "Executor",
    "check_arguments", "known_reads", "run_episode", "validation_error",
]
