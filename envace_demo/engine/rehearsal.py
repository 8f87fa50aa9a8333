"""Rehearsal of one call and its memory: the rehearser asked for the call's response
(unless the engine already knows it), the committed call's fidelity against it, and the
rehearsal memory as the committed actor reads it."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Callable, Generator

from envace_demo import memory as memory_mod
from envace_demo.calls import parse_execution_result
from envace_demo.certainty import outcome_certainty
from envace_demo.context import shots
from envace_demo.engine.config import EpisodeConfig
from envace_demo.engine.limits import cut_by
from envace_demo.fidelity import Context as FidelityContext
from envace_demo.fidelity import fidelity, score
from envace_demo.generation import CUT
from envace_demo.models.base import Backend, Generation, Sampling
from envace_demo.models.grammar import rehearsal_constraint
from envace_demo.prompts import Conversation, rehearser_messages, rehearser_prompt, shows_response_schema
from envace_demo.record import CallStep, ToolCall, Turn
from envace_demo.scheduler import Request
from envace_demo.schemas import Tool
from envace_demo.validation import repeated_failure, validation_error


class CallRehearser:
    """Asks the rehearser for one call's response. A committed call asked in a prompt an
    imagined run already answered takes that answer: its prediction for this very call; so
    does an imagined run's call, where the rehearser is greedy (asked again, it would only
    say the same). A committed call asked again with no real call since (after its hold)
    takes the prediction it had: the world it was made in has not changed."""

    def __init__(self, backend: Backend, config: EpisodeConfig, sampling: Sampling, constrained: bool,
                 failures: bool, facts: Callable[[ToolCall, list[tuple[ToolCall, Any]]], str | None] | None = None):
        self.backend = backend
        # Where the rehearser reasons from stated facts: the environment's (``facts.py``).
        self.facts = facts if constrained and config.state_facts and config.rehearser_think_chars is not None else None
        self.config = config
        self.sampling = sampling
        self.constrained = constrained
        self.failures = failures  # a first rehearsal may predict a domain failure
        # Rehearser prompt -> (output, rehearsal index, certainty).
        self._predicted: dict[str, tuple[str, int | None, float | None]] = {}
        # (committed call, real results before it) -> (output, certainty).
        self._committed: dict[tuple[str, int], tuple[str, float | None]] = {}
        self._greedy = sampling.for_role("rehearser").temperature == 0

    def rehearse(
        self,
        turn: Turn,
        step: CallStep,
        tool: Tool | None,
        tools: list[Tool],
        conversation: Conversation,
        real_results: list[tuple[ToolCall, Any]],
        where: str,
        rindex: int | None,
        context: list[tuple[ToolCall, Any]] = (),
        deadline: float | None = None,
        ask: bool = True,
    ) -> Generator[Request, Generation, None]:
        """``step.rehearsed``; ``deadline``: where the rehearsal gives way (a committed call's);
        without ``ask`` only a prediction an imagined run already made is taken."""
        decided = validation_error(step.call, tool, step.validation_errors)
        if decided is None:
            decided = repeated_failure(step.call, real_results)
        if decided is not None:
            # Validation, or a failure met again in an unchanged world, is certain here: the
            # engine writes the response itself and the model is not asked (it could only
            # guess what the engine already knows).
            step.rehearsed = decided
            step.rehearsal_text = None
            return
        again = (step.call.key(), len(real_results))
        if where == "commit" and again in self._committed:
            step.rehearsal_text, step.certainty = self._committed[again]
            step.rehearsed, step.repeats_hold = parsed_rehearsal(step.rehearsal_text), True
            return
        cfg = self.config
        shown = shots(cfg.known_results, real_results, list(context))
        # Facts only from reads made for this very call: an imagined run past its first
        # imagined write has none, and older reads may no longer hold. The prompt shows the
        # reads, so a prediction taken from the same prompt opened with the same facts.
        if self.facts is not None and context:
            step.stated_facts = self.facts(step.call, shown)
        messages = rehearser_messages(
            tools, shown, conversation, turn.action.text, step.call, tool,
            response_schema=shows_response_schema(self.backend.info.model_id, cfg.response_schema),
        )
        prompt = rehearser_prompt(self.backend, messages)
        step.rehearser_prompt = prompt.shown()
        if (where == "commit" or self._greedy) and step.rehearser_prompt in self._predicted:
            step.rehearsal_text, step.rehearsal_from, step.certainty = self._predicted[step.rehearser_prompt]
            step.rehearsed = parsed_rehearsal(step.rehearsal_text)
            if where == "commit":
                self._committed[again] = (step.rehearsal_text, step.certainty)
            return
        if not ask:
            step.rehearser_prompt = None
            return
        # What the call fixes is pinned; a failure seen for real may be said again (grammar.py).
        constraint = rehearsal_constraint(
            tool.response if tool else None, step.call.name, step.call.arguments, real_results, self.failures,
            cfg.rehearser_bound,
        ) if self.constrained else None
        if constraint is not None and step.stated_facts is not None:
            constraint = replace(constraint, think_lead=step.stated_facts)
        gen = yield Request(prompt, constraint, "rehearser", where, rindex, deadline=deadline)
        step.rehearse_seconds = round(gen.seconds, 3)
        if gen.finish_reason == CUT:
            step.rehearsal_cut = True
            return
        step.rehearsal_text = gen.text
        step.rehearse_tokens = gen.new_tokens
        cut = cut_by(self.sampling) if gen.finish_reason == "length" else None
        step.rehearsed = parsed_rehearsal(gen.text, cut)
        step.certainty = outcome_certainty(gen) if cut is None else None
        if where == "rehearsal" and cut is None:
            self._predicted.setdefault(step.rehearser_prompt, (gen.text, rindex, step.certainty))
        elif cut is None:
            self._committed[again] = (gen.text, step.certainty)


def score_call(step: CallStep, tool: Tool | None, shown: list[tuple[ToolCall, Any]], conversation: Conversation) -> None:
    """The committed call's fidelity and its parts (``fidelity.score``): a rehearsal cut
    or unparsable is a miss; values the rehearser's context held are the knowable ones."""
    if step.real is None or step.error:
        return
    history = [r for t in conversation.turns for _, r in conversation.results(t)]
    context = FidelityContext(
        arguments=step.call.arguments,
        known=tuple([*(r for _, r in shown), *history]),
        description=json.dumps(tool.to_openai(), ensure_ascii=False) if tool else "",
    )
    parts = score(step.rehearsed, step.real, context)
    step.fidelity = fidelity(step.rehearsed, step.real)
    step.outcome_right, step.knowable, step.unknowable = parts.outcome_right, parts.knowable, parts.unknowable


def parsed_rehearsal(text: str, cut: str | None = None) -> Any:
    """The rehearser's result; one that does not parse as an error object (the actor still
    needs a tool message), naming the budget that ``cut`` it short."""
    result, problem = parse_execution_result(text)
    if not problem:
        return result
    if cut is not None:
        problem = f"{cut} before the result was closed ({problem})"
    return {"error": {"code": "REHEARSAL_FAILED", "message": problem}}


def memory_text(memory: dict | None, view: str) -> str | None:
    """The rehearsal memory as the committed actor reads it (``EpisodeConfig.memory``)."""
    if not memory or view == "off":
        return None
    if view == "full":
        return memory.get("text") or None
    return memory_mod.render(memory.get("attempts", []), values=False) or None
