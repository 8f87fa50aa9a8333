"""The app's caps (UIOptions): what they take from the settings and the input policy."""

from envace_demo.policy import InputPolicy
from envace_demo.settings import Settings
from envace_demo.ui.options import UIOptions


def test_a_private_app_with_default_settings_has_the_default_options():
    options = UIOptions.from_settings(Settings.from_env({}))
    assert options == UIOptions()
    assert options.input_policy.max_bytes == InputPolicy().max_bytes
    assert options.input_policy.max_file_bytes == InputPolicy().max_file_bytes


def test_a_private_app_raises_its_caps_to_the_operators_settings_and_never_lowers_them():
    env = {"ENVACE_MAX_NEW_TOKENS": "4096", "ENVACE_MAX_STEPS": "20", "ENVACE_CONCURRENCY": "3",
           "ENVACE_QUEUE_SIZE": "5", "ENVACE_MCP_TIMEOUT": "7"}
    raised = UIOptions.from_settings(Settings.from_env(env))
    assert (raised.max_new_tokens, raised.max_steps, raised.concurrency, raised.queue_size, raised.mcp_timeout) == (
        4096, 20, 3, 5, 7.0)
    low = UIOptions.from_settings(Settings.from_env({"ENVACE_MAX_NEW_TOKENS": "64", "ENVACE_MAX_STEPS": "1"}))
    assert (low.max_new_tokens, low.max_steps) == (UIOptions().max_new_tokens, UIOptions().max_steps)


def test_a_public_app_caps_visitors_at_the_settings():
    public = UIOptions.from_settings(Settings.from_env({"SPACE_ID": "team/demo", "ENVACE_MAX_NEW_TOKENS": "300"}))
    assert public.public and public.max_new_tokens == 300 and public.max_steps == Settings().max_steps
    assert public.max_input_bytes == Settings().max_input_bytes and not public.allow_manual
