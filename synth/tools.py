"""The agent's tools, declared once: argument models, and the JSON-schema function specs derived from them.

Synthesis, the critic and RL all read these declarations; the implementations live in
`synth.environment`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SearchArgs(_Args):
    query: str = Field(min_length=1, description="keywords or a title to search for")
    top_k: int = Field(default=5, ge=1, le=20, description="how many results to return")


class OpenPageArgs(_Args):
    title: str = Field(min_length=1, description="the page title, as shown in search results")
    page: int = Field(default=1, ge=1, description="which chunk of the page to read, from 1")


class FindInPageArgs(_Args):
    title: str = Field(min_length=1, description="the page title")
    text: str = Field(min_length=1, description="the text to find in the page")


class AnswerArgs(_Args):
    text: str = Field(min_length=1, description="the final answer, as short as possible")


TOOL_ARGS: dict[str, type[_Args]] = {
    "search": SearchArgs,
    "open_page": OpenPageArgs,
    "find_in_page": FindInPageArgs,
    "answer": AnswerArgs,
}

TOOL_DESCRIPTIONS = {
    "search": "Search the encyclopedia. Returns ranked page titles with a snippet each.",
    "open_page": "Read a page's cleaned text in numbered chunks; redirects are followed.",
    "find_in_page": "Find the sentences of a page that contain a text.",
    "answer": "Give the final answer and end the task.",
}


def tool_specs() -> list[dict[str, Any]]:
    """OpenAI `tools` declarations (JSON-schema functions) for every tool."""
    specs = []
    for name, model in TOOL_ARGS.items():
        schema = model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        specs.append(
            {"type": "function", "function": {"name": name, "description": TOOL_DESCRIPTIONS[name], "parameters": schema}}
        )
    return specs


def validate_call(name: str, arguments: Any) -> tuple[_Args | None, str | None]:
    """Parse a call's arguments against its tool's schema: (parsed, None) or (None, error message)."""
    model = TOOL_ARGS.get(name)
    if model is None:
        return None, f"unknown tool {name!r}; available: {', '.join(TOOL_ARGS)}"
    if not isinstance(arguments, dict):
        return None, f"arguments of {name} must be a JSON object"
    try:
        return model.model_validate(arguments), None
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in error.errors())
        return None, f"invalid arguments for {name}: {problems}"
