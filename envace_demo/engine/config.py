"""What one episode runs: its mode, its budget, and how rehearsal feeds the committed run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from envace_demo.errors import ConfigError
from envace_demo.models.base import Backend, Sampling
from envace_demo.modes import MODES
from envace_demo.record import ToolCall
from envace_demo.settings import Settings, default_of

# What the committed actor may read of the rehearsal memory (``EpisodeConfig.memory``).
MEMORY_VIEWS = ("outcomes", "full", "off")
MEMORY_SHOWN = ("foresight", "always")
REHEARSE_COMMITTED = ("writes", "all")
IMAGINED_UNTIL = ("first_write", "answer")
IMAGINED_READS = ("fetch", "rehearse")
IMAGINED_OTHERS = ("on_foresight", "always")


def _settings_sampling() -> Sampling:
    """The sampling an episode uses unless given one: the settings' new-token budget."""
    return Sampling(max_new_tokens=default_of(Settings, "max_new_tokens"))


@dataclass
class EpisodeConfig:
    """What one episode runs. The run's budget (steps, new tokens, time limit) defaults to
    the settings' (``Settings``): the one place those defaults are written. The app passes
    the budget fitted to the loaded model (``budget.apply``), then what the visitor chose."""

    mode: str = field(default="parallel", metadata={"help": f"what runs: one of {', '.join(MODES)} (envace_demo.modes)"})
    n: int = field(default=2, metadata={"help": "imagined trajectories per user turn (1 to 64)"})
    sampling: Sampling = field(default_factory=_settings_sampling, metadata={
        "help": "sampling of every generation; default: Sampling's, with the settings' max_new_tokens"})
    max_steps: int = field(
        default=default_of(Settings, "max_steps"),
        metadata={"help": "actor turns that call tools per trajectory (Settings.max_steps); past them a committed "
                  "run is asked once more for an answer, with no call on offer. The steps of another path a "
                  "rehearsal found for a held call (engine/repair.py) are the engine's, not counted"},
    )
    episode_seconds: float = field(default=default_of(Settings, "episode_seconds"),
                                   metadata={"help": "wall-clock limit of the episode (Settings.episode_seconds)"})
    rehearsal_share: float = field(
        default=0.5,
        metadata={"help": "share of episode_seconds the rehearsals may spend before the committed run, whose "
                  "reserve is the rest (0 to 1, exclusive); modes without a committed run (imagine) use it all"},
    )
    tool_seconds: float = field(default=60.0, metadata={"help": "one real call's limit; above the MCP per-request "
                                "timeout (30 s), whose own error is clearer"})
    constrained: bool = field(default=True, metadata={"help": "constrained decoding, where the backend supports it"})
    require_first_call: bool = field(default=False, metadata={"help": "the first actor turn must call a tool: small "
                                     "models otherwise answer in prose"})
    think_chars: int | None = field(
        default=None,
        metadata={"help": "reasoning bound (characters) under constrained decoding; None: the backend's own. "
                  "Fitted to the model's speed (budget.py): 0 on a machine where reasoning costs the minute"},
    )
    rehearser_think_chars: int | None = field(
        default=None,
        metadata={"help": "the rehearser's reasoning bound (characters) under constrained decoding; None: "
                  "think_chars. A rehearser adapter trained to state the deciding facts first asks for its own "
                  "(for_backend reads it: models.adapters.rehearser_think_chars)"},
    )
    state_facts: bool = field(
        default=True,
        metadata={"help": "a rehearser trained to reason from the deciding facts (one with a reasoning bound of "
                  "its own, rehearser_think_chars) has the engine state them, from the reads in its context, "
                  "as its reasoning's start (facts.py); the outcome and the result stay its own"},
    )
    response_schema: bool | None = field(default=None, metadata={"help": "the declared response schema as one extra "
                                         "line of the rehearser's message; None: on only for models EnvACE did not "
                                         "train (the trained ones never saw that line)"})
    known_results: tuple[tuple[ToolCall, Any], ...] = field(
        default=(),
        compare=False,
        metadata={"help": "real (call, result) pairs from this visitor's earlier episodes on the same environment "
                  "(reads made before any write, so they hold in the fresh state every episode starts from): "
                  "the rehearser's few-shot, before this episode's own real results"},
    )
    base_weights: bool = field(default=False, metadata={"help": "run on the served model's base weights, its "
                               "adapter switched off (Compare's base side)"})
    rehearse_failures: bool | None = field(default=None, metadata={
        "help": "whether a first rehearsal may predict a domain failure; None: where the model was trained to "
                "rehearse (grammar.rehearses_failures)"})
    memory_fidelity_floor: float | None = field(
        default=0.75,
        metadata={"help": "the committed actor stops reading the rehearsal memory once a real response contradicts "
                  "its rehearsal: a failure where success was rehearsed (or the reverse), or a fidelity below "
                  "this (0 to 1). A small model copies the memory's values and repeats its calls; None: keep it"},
    )
    memory: str = field(default="outcomes", metadata={"help": "what the committed actor reads of the rehearsals: "
                        "'outcomes' (each rehearsed call and whether it was predicted to succeed or which error), "
                        "'full' (the predicted values too), or 'off'"})
    memory_shown: str = field(
        default="foresight",
        metadata={"help": "when the committed actor reads the memory: 'foresight' (only when a rehearsal foresaw "
                  "a failure as surely as trust_certainty asks, or an invalid call, in parallel the lead one, whose "
                  "path is the committed run's: a less sure one runs at once, hold_certainty; a "
                  "rehearsal that foresaw nothing changes nothing, and the committed run acts as one without "
                  "rehearsal would), or 'always'"},
    )
    imagined_until: str = field(
        default="first_write",
        metadata={"help": "how far an imagined run goes in a mode that commits: 'first_write' (it ends once it "
                  "has rehearsed a call that changes state, or whose environment does not say: that outcome is what "
                  "the committed run needs; past it the world is imagined), or 'answer'"},
    )
    imagined_others: str = field(
        default="on_foresight",
        metadata={"help": "when parallel's other imagined runs (beside the lead one) run: 'on_foresight' (the "
                  "lead runs first, the others only where it foresaw a failure or an invalid call: with "
                  "memory_shown 'foresight' nothing else of theirs reaches the committed run, and on a CPU each "
                  "run costs its own time), or 'always' (all N in step)"},
    )
    follow_rehearsed_writes: bool = field(
        default=True,
        metadata={"help": "the committed actor, asked what the lead imagined run was asked, takes its write even "
                  "where drawn under the imagined runs' grammar (answers cut to one character), when the "
                  "rehearsal let it through (valid, a success): the plan the rehearsal tested. False: its own"},
    )
    dictated_case: bool = field(
        default=True,
        metadata={"help": "a string argument the request holds in other letter case is put back as the user wrote "
                  "it, and one of a write that is most of a span the user dictated is given the whole span "
                  "(verbatim.as_dictated), where its schema leaves case free: asked to save 'Dentist Tuesday 3pm', "
                  "the actor wrote 'dentist Tuesday 3pm'. False: the calls stand as drawn"},
    )
    answer_without_memory: bool = field(
        default=True,
        metadata={"help": "the memory guides which calls the committed actor makes, not what it tells the user: "
                  "an answer it gives with the rehearsal memory in view is set aside, and the answer is drawn "
                  "again (no call on offer, the same seed) from the conversation alone, so where the real "
                  "results are the same it is worded as without rehearsal. Asked to send more than an account "
                  "held, the actor answered the foreseen refusal without the word its answer had without "
                  "rehearsal. False: the answer drawn with the memory stands"},
    )
    drop_unasked_failures: bool = field(
        default=True,
        metadata={"help": "a committed write in a request that asks a question (what, which, is, does, ...: "
                  "engine/imagined.py), whose rehearsal foresaw a failure at any certainty, is not made and leaves "
                  "the actor's history; the actor answers from the real results, no call on offer. Nobody asked for "
                  "it, so a wrong foresight loses nothing: asked what was on a todo list, the actor read it, then "
                  "wrote it back without overwrite and failed for real. False: such a write is held like any other"},
    )
    questions_keep: bool = field(
        default=True,
        metadata={"help": "in a request that asks a question (what, which, is, does, ...: engine/imagined.py), the "
                  "actor's grammar offers no tool that may change or remove what is there: a write the environment "
                  "does not declare additive, nor an additive one the request does not name (acting.names_write: 'put it "
                  "on hold' names place_hold). Asked 'How much did I "
                  "spend in February?', the embedded actor deleted the budget file, with and without rehearsal. "
                  "Every mode. False: every tool is on offer"},
    )
    grounded_ids: bool = field(
        default=True,
        metadata={"help": "an identifier argument (id, *_id) with a declared pattern is, in the actor's grammar, one "
                  "of the values of that shape in the user's messages or the tool results so far; a tool whose "
                  "required identifier has none is not on offer until a call finds one (envace_demo.identifiers); "
                  "so is a write's required number (an amount: offer.said_amounts). Only decoding changes"},
    )
    imagined_reads: str = field(
        default="fetch",
        metadata={"help": "what an imagined run does with a call of a tool the environment declares read-only, "
                  "while its world is still the real one: 'fetch' (made for real: it changes nothing, costs no "
                  "rehearsal, and the run's next step is made from the real state) or 'rehearse'"},
    )
    rehearse_committed: str = field(
        default="writes",
        metadata={"help": "which committed calls the rehearser is asked about before they run: 'writes' (calls of "
                  "tools that change state, or whose environment does not say; a read takes a prediction an "
                  "imagined run made for it, if any, and runs: its real result is safe to fetch), or 'all'"},
    )
    hold_predicted_failures: bool = field(
        default=True,
        metadata={"help": "a committed call whose rehearsal predicts a failure is held the first time: not "
                  "executed, the actor shown the prediction, so it can take another path (asked again, it runs); "
                  "a call to a tool the environment declares read-only is never held: its real result is safe"},
    )
    hold_certainty: float | None = field(
        default=0.9,
        metadata={"help": "a predicted failure is held only where the rehearser gave it at least this probability "
                  "(CallStep.certainty); a less sure one runs for real at once, as without rehearsal (CallStep."
                  "unsure). None, or a rehearser that gives no probability: every predicted failure is held"},
    )
    report_failures: bool = field(default=True, metadata={"help": "an answer right after a failure must tell it "
                                  "(acknowledgment.py): asked again once, then the failure as returned stands"})
    repeated_reads_answer: bool = field(default=True, metadata={"help": "a committed turn of reads already made "
                                        "since the last write is not made again: the actor answers next"})
    named_writes: bool = field(default=True, metadata={"help": "an answer where the request names a write by name "
                               "(hold, freeze) that no call made is taken back once; that call is asked for next"})
    weigh_conditions: bool = field(default=True, metadata={"help": "a conditional request's writes follow the branch "
                                   "its real reads take: made where it holds, not where not (engine/condition.py)"})
    search_again: bool = field(default=True, metadata={"help": "a committed search that found nothing is made again "
                               "with other runs of the user's words (engine/again.py)"})
    finish_named_items: bool = field(default=True, metadata={"help": "an answer after a write, where the request names "
                                     "items no write touched, gives way to a call that touches one (engine/items.py)"})
    answer_what_asked: bool = field(default=True, metadata={"help": "an answer leaving out what its real reads said "
                                    "of the question is asked again, twice at most, then gets it added (engine/asked.py)"})
    whole_quotes: bool = field(default=True, metadata={"help": "a final answer ending on a real result's text cut "
                               "short at a line's end gets the rest of that text (engine/quotes.py)"})
    read_instead: bool = field(default=True, metadata={"help": "a committed read refused as the wrong kind of thing "
                               "(a folder read as a file) or a file not there is made as the read the environment "
                               "names (read_instead)"})
    quoted_args: bool = field(default=True, metadata={"help": "an argument the environment says quotes the user (a "
                              "catalog search) is, in the grammar, a run of the user's words (envace_demo.quoted)"})
    check_given_up: bool = field(
        default=True,
        metadata={"help": "an answer given while a held call found no other path (no real write since the hold) "
                  "is set aside: the held call runs for real and the actor answers from what really happened, "
                  "so a foreseen failure changes the plan but never the verdict; False trusts the prediction "
                  "(a refusal from the read, no failing write, and a wrong prediction costs the task)"},
    )
    trust_certainty: float | None = field(
        default=0.9,
        metadata={"help": "a held call whose rehearser gave its foreseen failure at least this probability "
                  "(CallStep.certainty) is trusted: an answer given without another path stands and the call never "
                  "runs; a less sure one is checked (check_given_up); None checks every held call"},
    )
    repair_candidates: int = field(
        default=4,
        metadata={"help": "after a committed write is held (its failure foreseen surely), the actor is asked for "
                  "this many other calls, each rehearsed before anything runs; the first that makes the user's call go "
                  "through (the call with one more argument, such as overwrite, or an additive call first, such as "
                  "the missing folder) is committed (engine/repair.py): the actor had reported the failure. 0: none"},
    )
    redact: Callable[[str], str] | None = field(default=None, repr=False, compare=False, metadata={
        "help": "turns an exception's text into what the record may show (public mode hides server paths and "
                "secrets); None shows it as is"})

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        if self.mode in ("parallel", "sequential", "imagine") and not 1 <= self.n <= 64:
            raise ConfigError(f"n must be between 1 and 64, not {self.n}")
        if not 0 <= self.repair_candidates <= 16:
            raise ConfigError(f"repair_candidates must be between 0 and 16, not {self.repair_candidates}")
        if not self.tool_seconds > 0:
            raise ConfigError(f"tool_seconds must be positive, not {self.tool_seconds}")
        if not 0 < self.rehearsal_share < 1:
            raise ConfigError(f"rehearsal_share must be between 0 and 1 (exclusive), not {self.rehearsal_share}")
        for name, choices in (("memory", MEMORY_VIEWS), ("memory_shown", MEMORY_SHOWN),
                              ("imagined_until", IMAGINED_UNTIL), ("imagined_reads", IMAGINED_READS),
                              ("imagined_others", IMAGINED_OTHERS),
                              ("rehearse_committed", REHEARSE_COMMITTED)):
            if getattr(self, name) not in choices:
                raise ConfigError(f"{name} must be one of {', '.join(choices)}, not {getattr(self, name)!r}")
        for name in ("think_chars", "rehearser_think_chars"):
            if getattr(self, name) is not None and getattr(self, name) < 0:
                raise ConfigError(f"{name} must be 0 or more, not {getattr(self, name)}")
        for name in ("trust_certainty", "hold_certainty"):
            value = getattr(self, name)
            if value is not None and not 0 < value <= 1:
                raise ConfigError(f"{name} must be above 0 and at most 1, not {value}")
        if self.memory_fidelity_floor is not None and not 0 <= self.memory_fidelity_floor <= 1:
            raise ConfigError(f"memory_fidelity_floor must be between 0 and 1, not {self.memory_fidelity_floor}")

    @property
    def rehearser_bound(self) -> int | None:
        """The rehearser's reasoning bound: its own where set, else ``think_chars``."""
        return self.think_chars if self.rehearser_think_chars is None else self.rehearser_think_chars

    @classmethod
    def for_backend(cls, backend: Backend, *, constrained: bool = True, require_first_call: bool | None = None,
                    **values: Any) -> "EpisodeConfig":
        """A config that asks of ``backend`` only what it can do: constrained decoding where it
        supports it; a required first call where it needs one, unless said otherwise; the
        rehearser's reasoning bound its adapter was trained with, unless given."""
        first = backend.requires_first_call if require_first_call is None else require_first_call
        if values.get("rehearser_think_chars") is None:
            from envace_demo.models.adapters import rehearser_think_chars

            values["rehearser_think_chars"] = rehearser_think_chars(backend)
        return cls(constrained=constrained and backend.supports_constraints, require_first_call=first, **values)
