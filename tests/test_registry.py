"""envs.registry: one way to open an environment, for the CLI and the app alike."""

import pytest

from envace_demo.envs.registry import open_environment
from envace_demo.errors import ConfigError, EnvironmentNotFound


def test_no_spec_is_no_environment_and_a_builtin_opens_fresh():
    assert open_environment(None) is None and open_environment("") is None
    with open_environment("bank") as first, open_environment("bank") as second:
        first.execute("deposit", {"account_id": "ACC-1003", "amount": 5})
        assert first.state() != second.state()  # each episode gets its own state


@pytest.mark.parametrize("spec", ["mcp:server-9", "mcp:python examples/mcp_server.py", "mcp:http://127.0.0.1:1/mcp"])
def test_an_mcp_spec_names_a_configured_label_never_a_command_or_address(spec):
    with pytest.raises(ConfigError, match="no MCP server .* was configured at launch"):
        open_environment(spec, {"server-1": "python examples/mcp_server.py"})


def test_an_unknown_name_lists_the_builtins():
    with pytest.raises(EnvironmentNotFound, match="available: bank, files, library"):
        open_environment("../bank")



def test_the_builtin_schemas_own_patterns_are_the_trusted_ones():
    from envace_demo.envs.registry import builtin_patterns

    trusted = builtin_patterns()
    assert {"^ACC-[0-9]{4}$", "^BK-[0-9]{3}$"} <= trusted  # declared by examples/bank and examples/library
    assert "^(a+)+$" not in trusted
