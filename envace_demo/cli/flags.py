"""The flags several commands share, as dataclasses that ``HfArgumentParser`` turns into
arguments. Each flag's default, choices and help come from where the value is defined:
``Settings`` (model and budget), ``Sampling`` and ``EpisodeConfig`` (the episode), so a
default is written once and the help shows it."""

from __future__ import annotations

import argparse
from dataclasses import MISSING, Field, dataclass, field, fields, make_dataclass
from typing import Any, Literal, Sequence, get_type_hints

from transformers import HfArgumentParser

from envace_demo.engine import MODES, EpisodeConfig
from envace_demo.engine.config import IMAGINED_OTHERS, IMAGINED_READS
from envace_demo.models.base import Sampling
from envace_demo.settings import Settings, default_of


class Switch(argparse.BooleanOptionalAction):
    """``--flag`` / ``--no-flag`` for an optional bool (None: not given). ``HfArgumentParser``
    passes a ``type`` for bool fields, which this action has no use for."""

    def __init__(self, *args: Any, type: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows a default only where there is one: an optional flag left out means 'not given'."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


def new_parser(**kwargs: Any) -> HfArgumentParser:
    return HfArgumentParser(formatter_class=HelpFormatter, **kwargs)


def _optional(name: str, hint: Any, help: str) -> tuple[str, Any, Field]:
    metadata: dict[str, Any] = {"help": help}
    if hint is bool or hint == bool | None:
        metadata["action"] = Switch
    return name, hint | None, field(default=None, metadata=metadata)


def optional_flags(cls_name: str, source: type, names: list[str], note, group: str | None = None) -> type:
    """A dataclass of ``source``'s fields ``names``, each a flag whose None means 'not given';
    its help is the source field's followed by ``note(field)``."""
    hints, by_name = get_type_hints(source), {f.name: f for f in fields(source)}
    specs = [_optional(name, hints[name], by_name[name].metadata["help"] + note(by_name[name])) for name in names]
    flags = make_dataclass(cls_name, specs)
    if group:
        flags._argument_group_name = group  # HfArgumentParser puts the flags in this group
    return flags


def _setting_note(f: Field) -> str:
    default = "" if f.default in (None, MISSING) else f", default {f.default}"
    return f" (env {f.metadata['env']}{default})"


_REMOTE = ["backend", "base_url", "api_key", "openai_extras", "quantization"]
# run, eval and showcase: a local model or a chat-completions server.
ModelFlags = optional_flags(
    "ModelFlags", Settings, ["model", "adapter", *_REMOTE, "dtype", "device", "constrained", "compile_decode"],
    _setting_note, group="model",
)
# train: a local model only, whose weights it trains.
LocalModelFlags = optional_flags(
    "LocalModelFlags", Settings, ["model", "adapter", "dtype", "device", "constrained", "compile_decode", "threads"],
    _setting_note, group="model",
)
# The episode's budget, shown with the environment variables that set it too.
BudgetFlags = optional_flags(
    "BudgetFlags", Settings, ["max_new_tokens", "think_tokens", "max_steps", "think_chars", "response_schema"], _setting_note
)


@dataclass
class FirstCallFlags:
    first_call: Literal["auto", "required", "optional"] = field(
        default="auto",
        metadata={"help": "whether the first actor turn must call a tool (auto: what the loaded model needs)"},
    )


def _like(cls: type, name: str, help: str | None = None, default: Any = MISSING) -> Any:
    """A flag with the default (unless ``default``) and help (unless ``help``) of ``cls.name``."""
    source = next(f for f in fields(cls) if f.name == name)
    value = source.default if default is MISSING else default
    return field(default=value, metadata={"help": help or source.metadata["help"]})


@dataclass
class EpisodeFlags:
    """One episode's mode, budget N and sampling (run and eval; eval's mode default is 'none')."""

    mode: Literal[MODES] = _like(
        EpisodeConfig, "mode", "none: act and execute; parallel, sequential: N rehearsals, then the committed "
        "run; imagine: rehearsals only"
    )
    # None: not given (run fits it to the model's speed; elsewhere EpisodeConfig's default), so an
    # explicit --n equal to that default is still kept.
    n: int | None = _like(
        EpisodeConfig, "n", f"rehearsal budget N; default: run fits it to the model's speed, else "
        f"{default_of(EpisodeConfig, 'n')}", default=None,
    )
    seed: int = _like(Sampling, "seed", default=0)  # a command line run is repeatable by default
    temperature: float = _like(Sampling, "temperature")
    top_p: float = _like(Sampling, "top_p")
    top_k: int = _like(Sampling, "top_k")
    rehearse_temperature: float | None = _like(Sampling, "rehearse_temperature")
    check_given_up: bool = _like(EpisodeConfig, "check_given_up")
    trust_certainty: float = _like(
        EpisodeConfig, "trust_certainty", "trust a held call whose rehearser gave its foreseen failure at least this "
        "probability: the answer stands and the call never runs; 0 checks every held call (--check-given-up)",
    )
    hold_certainty: float = _like(
        EpisodeConfig, "hold_certainty", "hold a call whose rehearsal predicts a failure only where the rehearser gave "
        "it at least this probability; a less sure one runs for real at once; 0 holds every predicted failure",
    )
    imagined_reads: Literal[IMAGINED_READS] = _like(EpisodeConfig, "imagined_reads")
    imagined_others: Literal[IMAGINED_OTHERS] = _like(EpisodeConfig, "imagined_others")
    grounded_ids: bool = _like(EpisodeConfig, "grounded_ids")
    follow_rehearsed_writes: bool = _like(EpisodeConfig, "follow_rehearsed_writes")
    json: bool = field(default=False, metadata={"help": "print JSON instead of text"})


# The flags that are settings (an eval's --concurrency is not the app's).
_SETTING_FLAGS = {f.name for flags in (ModelFlags, LocalModelFlags, BudgetFlags) for f in fields(flags)}


def settings_from(args: argparse.Namespace) -> Settings:
    """The settings: the environment's, with each model and budget flag given on top."""
    given = {name: getattr(args, name, None) for name in _SETTING_FLAGS}
    mcp = getattr(args, "mcp", None)
    return Settings.from_env(**given, mcp_servers=tuple(mcp) if mcp else None)


def load_model(settings: Settings):
    from envace_demo.models.loader import load_configured  # heavy: torch, transformers

    return load_configured(settings)


def episode_config(args: argparse.Namespace, settings: Settings, backend: Any) -> EpisodeConfig:
    return EpisodeConfig.for_backend(
        backend,
        constrained=settings.constrained is not False,
        require_first_call=None if args.first_call == "auto" else args.first_call == "required",
        mode=args.mode,
        n=episode_n(args),
        sampling=Sampling.taken_from(args, max_new_tokens=settings.max_new_tokens, think_tokens=settings.think_tokens),
        max_steps=settings.max_steps,
        episode_seconds=settings.episode_seconds,
        think_chars=settings.think_chars,
        response_schema=settings.response_schema,
        check_given_up=getattr(args, "check_given_up", default_of(EpisodeConfig, "check_given_up")),
        imagined_reads=getattr(args, "imagined_reads", default_of(EpisodeConfig, "imagined_reads")),
        imagined_others=getattr(args, "imagined_others", default_of(EpisodeConfig, "imagined_others")),
        grounded_ids=getattr(args, "grounded_ids", default_of(EpisodeConfig, "grounded_ids")),
        follow_rehearsed_writes=getattr(args, "follow_rehearsed_writes",
                                        default_of(EpisodeConfig, "follow_rehearsed_writes")),
        trust_certainty=getattr(args, "trust_certainty", default_of(EpisodeConfig, "trust_certainty")) or None,
        hold_certainty=getattr(args, "hold_certainty", default_of(EpisodeConfig, "hold_certainty")) or None,
    )


def episode_n(args: argparse.Namespace) -> int:
    """The rehearsal budget N the flags ask for (EpisodeConfig's default when not given)."""
    return args.n if args.n is not None else default_of(EpisodeConfig, "n")


# The flag sets of the commands that load a model.
MODEL = [FirstCallFlags, ModelFlags]
EPISODE = [EpisodeFlags, BudgetFlags, *MODEL]


def add_command(sub, name: str, handler, dataclass_types: Sequence[type] = (), **kwargs: Any) -> HfArgumentParser:
    """A subcommand of ``sub`` (the subparsers of an ``HfArgumentParser``) with the flags of
    ``dataclass_types``; ``args.handler`` runs it."""
    parser = sub.add_parser(name, dataclass_types=list(dataclass_types), formatter_class=HelpFormatter, **kwargs)
    parser.set_defaults(handler=handler)
    return parser
