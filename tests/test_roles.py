"""LLM role flags shared by the question writer, the policies and the judge."""

import argparse

import pytest

from cli.roles import add_role_arguments, role_from_args
from ground.errors import UserError


def _parse(*argv):
    parser = argparse.ArgumentParser()
    add_role_arguments(parser, "judge", "the judge")
    return parser.parse_args(argv)


def test_no_endpoint_means_offline():
    assert role_from_args(_parse(), "judge") is None


def test_flags_override_config_values():
    base = {"base_url": "http://127.0.0.1:1/v1", "model": "a", "temperature": 0.1}
    role = role_from_args(_parse("--judge-model", "b", "--judge-concurrency", "3"), "judge", base)
    assert (role.base_url, role.model, role.max_concurrency, role.temperature) == ("http://127.0.0.1:1/v1", "b", 3, 0.1)
    assert role.api_key_env == "OPENAI_API_KEY"


def test_endpoint_without_model_is_a_user_error():
    with pytest.raises(UserError, match="--judge-base-url needs --judge-model"):
        role_from_args(_parse("--judge-base-url", "http://127.0.0.1:1/v1"), "judge")


def test_sizing_and_tool_choice_flags():
    role = role_from_args(_parse("--judge-base-url", "http://127.0.0.1:1/v1", "--judge-model", "m", "--judge-max-tokens",
                                 "64", "--judge-timeout", "30", "--judge-tool-choice", "required"), "judge")
    assert (role.max_tokens, role.timeout_s, role.tool_choice) == (64, 30.0, "required")
    defaults = role_from_args(_parse("--judge-base-url", "http://127.0.0.1:1/v1", "--judge-model", "m"), "judge")
    assert (defaults.max_tokens, defaults.tool_choice, defaults.start_concurrency) == (None, None, 1)
