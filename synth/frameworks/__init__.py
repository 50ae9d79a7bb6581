"""Agent frameworks: each maps its own output protocol to and from the canonical Trajectory/Turn record."""

from __future__ import annotations

from synth.frameworks.base import ContextWindow, Framework, ModelOutput, ParsedTurn
from synth.frameworks.function_calling import FunctionCallingFramework
from synth.frameworks.react import ReActFramework
from synth.frameworks.tagged import TaggedFramework

FRAMEWORKS: dict[str, type[Framework]] = {
    "react": ReActFramework,
    "function_calling": FunctionCallingFramework,
    "tagged": TaggedFramework,
}


def get_framework(name: str) -> Framework:
    try:
        return FRAMEWORKS[name]()
    except KeyError:
        raise ValueError(f"unknown framework {name!r}; available: {', '.join(FRAMEWORKS)}") from None


__all__ = ["FRAMEWORKS", "ContextWindow", "Framework", "ModelOutput", "ParsedTurn", "get_framework"]
