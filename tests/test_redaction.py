"""envace_demo.redaction: each form a configured secret takes on its way into a message."""

from __future__ import annotations

import pytest

from envace_demo.envs.mcp import _reason, parse_server
from envace_demo.redaction import SECRET, Redactor, command_secrets, public_url, redact_urls, safe_command
from envace_demo.settings import Settings
from envace_demo.ui.options import UIOptions

BASE_URL = "https://ops:hunter2hunter2@models.internal:8443/v1/"  # trailing slash, as configured
KEY = "sk-operator-0123456789abcdefSECRET"
MCP_COMMAND = "python /srv/operator/server.py --token s3cr3t-value-123 --port 9000"
MCP_URL = "http://10.0.0.5:9000/mcp?access_token=qqqqwwwweeee"
OPTIONS = UIOptions.from_settings(
    Settings(public=True, base_url=BASE_URL, api_key=KEY, mcp_servers=(MCP_COMMAND, MCP_URL))
)
SECRETS = ("hunter2hunter2", KEY, "s3cr3t-value-123", "qqqqwwwweeee", "models.internal", "10.0.0.5")


def shown(text: str) -> str:
    out = OPTIONS.redact(text)
    assert [s for s in SECRETS if s in out] == [], out
    return out


def test_a_base_url_is_stored_as_server_and_path_only():
    assert public_url(BASE_URL) == "https://models.internal:8443/v1"
    assert public_url("http://h:80/v1?key=abc#x") == "http://h:80/v1"
    assert public_url("not a url") == SECRET


@pytest.mark.parametrize(
    "text",
    [
        "https://ops:hunter2hunter2@models.internal:8443/v1/chat/completions: HTTP 500",
        "https://models.internal:8443/v1: cannot list the served models",  # no slash, no user info
        "https://models.internal:8443/v1/: timed out",
        "models.internal:8443/v1: connection refused",  # host:port/path, as a label shows it
        "the password hunter2hunter2 was refused",
        "hunter2hunter2%21 in a form",
        f"Authorization: Bearer {KEY}",
    ],
)
def test_the_model_servers_url_and_key_in_any_form(text):
    assert "<model server>" in shown(text) or SECRET in shown(text)


@pytest.mark.parametrize(
    "text",
    [
        MCP_COMMAND + ": exited",
        "python /srv/operator/server.py --token=s3cr3t-value-123 --port 9000: exited",  # the label form
        "10.0.0.5:9000/mcp: cannot connect",
        "Client error '401 Unauthorized' for url 'http://10.0.0.5:9000/mcp?access_token=qqqqwwwweeee'",
        "http://10.0.0.5:9000/mcp/: HTTP 404",
    ],
)
def test_an_mcp_servers_command_or_url_in_any_form(text):
    assert "<MCP server>" in shown(text) or SECRET in shown(text)


def test_a_record_is_redacted_everywhere_keys_included():
    record = {"final_state": {"error": {"message": f"for url '{MCP_URL}'"}}, BASE_URL: [KEY, 3]}
    out = OPTIONS.redact(record)
    assert out == {"final_state": {"error": {"message": "for url '<MCP server>'"}}, "<model server>": [SECRET, 3]}


def test_urls_lose_user_info_and_query_values_whoever_configured_them():
    text = "GET https://u:pw@api.example.org/x?token=abcdef&page=2 failed"
    assert redact_urls(text) == f"GET https://{SECRET}@api.example.org/x?token={SECRET}&page={SECRET} failed"


def test_command_lines_are_split_like_a_shell_would():
    command = "srv --token abc123456 --api-key=xyz987654 HF_TOKEN=hf_abcdefghijklmnop --port 80 'http://u:pw99@h/x?k=v1'"
    assert command_secrets(command) == ["abc123456", "xyz987654", "hf_abcdefghijklmnop", "u", "pw99", "v1"]
    assert "abc123456" not in safe_command(command) and "--port 80" in safe_command(command)


def test_an_mcp_label_and_an_http_error_hold_no_token():
    assert parse_server("python s.py --token=abcdefgh123").label.endswith(f"--token={SECRET}")
    assert "abcdefgh123" not in parse_server("python s.py --token abcdefgh123").label
    err = RuntimeError("Client error '404' for url 'http://127.0.0.1:9/mcp?token=abcdefgh123'")
    assert "abcdefgh123" not in _reason(err) and f"token={SECRET}" in _reason(err)


def test_ordinary_words_and_fields_are_left_alone():
    text = "author: Tolkien, monkey: 5, max_tokens=12, key: ACC-1003, see https://example.org/docs"
    assert Redactor(secrets=("none",)).text(text) == text
