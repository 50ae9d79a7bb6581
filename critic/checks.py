"""Programmatic tool-call checks: the first, cheapest and most certain part of tool-call accuracy.

Each check answers one question about a turn's call. They run in order: a turn that could not be parsed
or named an unknown tool is not asked whether its result was empty. A failed check carries the score it
caps tool accuracy at and the failure kind it stands for. Given what the trajectory knows before the turn,
a valid call is also asked whether a searcher could sensibly make it (`check_sensible`): a page that does
not exist must at least have been named by the question or a result, if misspelt (a made-up title is the
cause of the error it gets), and a query must hold content words and not copy our own instructions. The
whole question as a query is a plain first search (agents commonly start so); what it finds is judged by
information gain, not here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from critic.text import contains_phrase, content_tokens, normalize
from schemas.critic import FailureKind
from schemas.trajectory import ToolCall, Turn
from synth.tools import TOOL_ARGS, validate_call

ANSWER_TOOL = "answer"
_EMPTY_RESULT = re.compile(
    r"^\W*(no (?:results?|matches|occurrences?|pages?|sentences?|hits?)\b|nothing (?:found|matched)|0 results?\b|"
    r"(?:the )?(?:search|query) returned no)",
    re.IGNORECASE,
)

# Our own instructions and error feedback, which a confused model pastes back as a query.
PROMPT_ECHO = re.compile(r"\b(?:you are an? [\w-]+ (?:agent|assistant)|research agent|one tool at a time|"
                         r"could not be parsed)\b|\berror:", re.IGNORECASE)
_DISAMBIGUATION = re.compile(r"\s*\([^)]*\)\s*$")


@dataclass(frozen=True)
class CheckResult:
    name: str
    passed: bool
    detail: str = ""
    cap: float = 1.0
    kind: FailureKind | None = None


# `json.dumps(..., sort_keys=True, default=str)` without building an encoder at each of the repeat check's
# calls (every earlier call of every turn).
_CALL_KEY = json.JSONEncoder(sort_keys=True, default=str)


def normalized_call(call: ToolCall) -> str:
    """A call's identity after normalisation: defaults filled, strings normalised, search words as a set."""
    return _call_identity(_CALL_KEY.encode([call.name, call.arguments]))


@lru_cache(maxsize=16384)
def _call_identity(raw: str) -> str:
    name, raw_arguments = json.loads(raw)
    call = ToolCall(call_id="", name=name, arguments=raw_arguments)
    parsed, _ = validate_call(call.name, call.arguments)
    arguments = parsed.model_dump() if parsed is not None else dict(call.arguments)
    canonical = {}
    for key, value in sorted(arguments.items()):
        if isinstance(value, str):
            words = normalize(value).split()
            value = " ".join(sorted(set(words))) if call.name == "search" and key == "query" else " ".join(words)
        canonical[key] = value
    return json.dumps([call.name, canonical], sort_keys=True, default=str)


def call_identities(turns: Sequence[Turn]) -> Callable[[ToolCall], str]:
    """`normalized_call` for the calls of these turns, each normalised once: the repeat check of every turn
    compares its call with all earlier ones. (A call is known by its object: the turns hold them all.)"""
    identities = {id(t.tool_call): normalized_call(t.tool_call) for t in turns if t.tool_call is not None}
    return lambda call: identities[id(call)] if id(call) in identities else normalized_call(call)


def is_answer_turn(turn: Turn) -> bool:
    """The turn that ends the run: an `answer` call, or a framework's final answer without a call."""
    if turn.tool_call is not None:
        return turn.tool_call.name == ANSWER_TOOL
    return turn.final_answer is not None


def is_empty_result(observation: str | None) -> bool:
    return observation is None or not observation.strip() or bool(_EMPTY_RESULT.match(observation.strip()))


def check_parsed(turn: Turn) -> CheckResult:
    if turn.parse_error or (turn.tool_call is None and turn.final_answer is None):
        reason = turn.parse_error or "no tool call and no final answer"
        return CheckResult("parsed", False, f"output could not be parsed: {reason}", 0.0, "malformed_call")
    return CheckResult("parsed", True)


def check_tool_exists(call: ToolCall) -> CheckResult:
    if call.name not in TOOL_ARGS:
        return CheckResult("tool_exists", False, f"unknown tool {call.name!r}", 0.0, "malformed_call")
    return CheckResult("tool_exists", True)


def check_arguments(call: ToolCall) -> CheckResult:
    _, error = validate_call(call.name, call.arguments)
    if error:
        return CheckResult("arguments_valid", False, error, 0.0, "malformed_call")
    return CheckResult("arguments_valid", True)


def check_sensible(turn: Turn, known: str) -> CheckResult:
    """Would a searcher make this call, knowing `known` (the normalised question and results so far)?"""
    call = turn.tool_call
    if call.name == "search":
        query = str(call.arguments.get("query", ""))
        if not content_tokens(query):
            return CheckResult("sensible", False, f"query {query!r} holds only stop words", 0.2, "not_sensible")
        if PROMPT_ECHO.search(query):
            return CheckResult("sensible", False, "the query copies our instructions", 0.2,
                               "not_sensible")
    elif call.name in ("open_page", "find_in_page") and turn.tool_error:
        title = _DISAMBIGUATION.sub("", str(call.arguments.get("title", "")))
        if not contains_phrase(known.replace("\n", " "), title) and not _slip_of_a_known_name(title, known):
            return CheckResult("sensible", False, f"no page {title!r}, and no result or the question named one: "
                               "a made-up title", 0.2, "not_sensible")
    return CheckResult("sensible", True)


def _slip_of_a_known_name(title: str, known: str) -> bool:
    """"Christopher Nolann" for a known "Christopher Nolan": every longer word starts like a known one."""
    prefixes = {word[:4] for word in known.split()}
    words = [w for w in content_tokens(title) if len(w) > 2]
    return bool(words) and all(w[:4] in prefixes for w in words)


def check_ran(turn: Turn) -> CheckResult:
    if turn.tool_error:
        excerpt = (turn.observation or "").strip().splitlines()[:1]
        return CheckResult("ran_without_error", False, f"tool error: {' '.join(excerpt)[:160]}", 0.2, "tool_error")
    return CheckResult("ran_without_error", True)


def check_not_repeated(call: ToolCall, earlier_calls: Iterable[ToolCall],
                       call_identity: Callable[[ToolCall], str] = normalized_call) -> CheckResult:
    """`call_identity` is `normalized_call`, or its values remembered for a trajectory's calls."""
    identity = call_identity(call)
    for earlier in earlier_calls:  # the identity starts with the tool's name: only a call of the same tool can repeat
        if earlier.name == call.name and call_identity(earlier) == identity:
            return CheckResult(
                "not_repeated", False, f"repeats call {earlier.call_id} ({earlier.name})", 0.1, "repeated_call"
            )
    return CheckResult("not_repeated", True)


def check_result_not_empty(turn: Turn) -> CheckResult:
    if is_empty_result(turn.observation):
        return CheckResult("result_not_empty", False, "the tool returned nothing", 0.3, "empty_result")
    return CheckResult("result_not_empty", True)


def run_checks(turn: Turn, earlier_turns: list[Turn], repeat_window: int | None = None,
               known: str | None = None, call_identity: Callable[[ToolCall], str] = normalized_call,
               ) -> list[CheckResult]:
    """The programmatic checks that apply to this turn, in order, stopping at the first failure (its root cause).

    `repeat_window` limits the repeat check to the last N turns (None: the whole trajectory). With
    `known` (the normalised question and earlier results), a valid call is checked for sense.
    `call_identity` (`normalized_call`, or `call_identities` of the trajectory) tells repeated calls apart.
    """
    parsed = check_parsed(turn)
    if not parsed.passed:
        return [parsed]
    call = turn.tool_call
    if call is None:  # a framework that states its final answer without an `answer` call
        return [parsed]
    results = [parsed, check_tool_exists(call)]
    if not results[-1].passed:
        return results
    results.append(check_arguments(call))
    if not results[-1].passed:
        return results
    if known is not None and call.name != ANSWER_TOOL:
        results.append(check_sensible(turn, known))
        if not results[-1].passed:
            return results
    recent = earlier_turns[-repeat_window:] if repeat_window else earlier_turns
    earlier_calls = [t.tool_call for t in recent if t.tool_call is not None and not t.parse_error]
    results.append(check_ran(turn))
    if results[-1].passed:
        results.append(check_not_repeated(call, earlier_calls, call_identity))
    if results[-1].passed and call.name != ANSWER_TOOL:
        results.append(check_result_not_empty(turn))
    return results
