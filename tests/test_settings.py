from pathlib import Path

import pytest

from envace_demo.errors import ConfigError
from envace_demo.settings import Settings


def test_defaults_without_environment():
    s = Settings.from_env({})
    assert s.model is None and s.public is False and s.max_steps == 3


def test_environment_variables_are_converted():
    s = Settings.from_env({"ENVACE_MODEL": "embedded", "ENVACE_MAX_STEPS": "3", "ENVACE_CONSTRAINED": "off",
                           "ENVACE_CACHE_DIR": "/tmp/x", "ENVACE_QUANTIZATION": "None", "ENVACE_EPISODE_SECONDS": "9.5"})
    assert (s.model, s.max_steps, s.constrained, s.cache_dir, s.quantization, s.episode_seconds) == (
        "embedded", 3, False, Path("/tmp/x"), None, 9.5)


def test_cli_overrides_beat_environment():
    s = Settings.from_env({"ENVACE_MODEL": "embedded"}, model="/models/envace", max_steps=None)
    assert s.model == "/models/envace" and s.max_steps == 3


def test_a_space_is_public_by_default_and_can_opt_out():
    assert Settings.from_env({"SPACE_ID": "team/demo"}).public is True
    assert Settings.from_env({"SPACE_ID": "team/demo", "ENVACE_PUBLIC": "0"}).public is False


@pytest.mark.parametrize("env, message", [
    ({"ENVACE_MAX_STEPS": "many"}, "ENVACE_MAX_STEPS='many'"),
    ({"ENVACE_CONSTRAINED": "maybe"}, "ENVACE_CONSTRAINED='maybe'"),
    ({"ENVACE_QUANTIZATION": "2bit"}, "quantization='2bit'"),
    ({"ENVACE_DEVICE": "tpu"}, "device='tpu'"),
    ({"ENVACE_MAX_STEPS": "0"}, "must be positive"),
])
def test_bad_values_name_the_setting(env, message):
    with pytest.raises(ConfigError) as err:
        Settings.from_env(env)
    assert message in str(err.value)


def test_quantization_none_from_a_flag_beats_the_environment():
    assert Settings.from_env({"ENVACE_QUANTIZATION": "4bit"}, quantization="none").quantization is None
    assert Settings.from_env({"ENVACE_QUANTIZATION": "4bit"}).quantization == "4bit"
    assert Settings.from_env({}).replace(quantization="none").quantization is None


@pytest.mark.parametrize("change, message", [
    ({"backend": "grpc"}, "backend='grpc': expected transformers, openai or oracle"),
    ({"dtype": "float64"}, "dtype='float64': expected auto, bfloat16, float16 or float32"),
    ({"quantization": "2bit"}, "quantization='2bit': expected none, 4bit or 8bit"),
])
def test_a_changed_setting_is_checked_against_its_choices(change, message):
    with pytest.raises(ConfigError) as err:
        Settings.from_env({}).replace(**change)
    assert message in str(err.value)


def test_the_run_budget_defaults_are_written_once_in_settings():
    from dataclasses import fields

    from envace_demo.engine import EpisodeConfig
    from envace_demo.settings import default_of

    config = EpisodeConfig()
    assert config.max_steps == default_of(Settings, "max_steps")
    assert config.episode_seconds == default_of(Settings, "episode_seconds")
    assert config.sampling.max_new_tokens == default_of(Settings, "max_new_tokens")
    assert all(f.metadata.get("help") for f in fields(EpisodeConfig))  # every field says what it does


def test_compile_decode_is_a_setting_and_a_flag():
    from envace_demo.cli import build_parser
    from envace_demo.cli.flags import settings_from

    assert Settings.from_env({}).compile_decode is False
    assert Settings.from_env({"ENVACE_COMPILE_DECODE": "1"}).compile_decode is True
    args = build_parser().parse_args(["run", "--env", "bank", "--compile-decode"])
    assert settings_from(args).compile_decode is True
