"""What every agent framework shares: the model-output type, the parsed turn, and context management.

A framework owns its protocol: the system prompt, how a model's output is parsed into a canonical
ToolCall, how a call is rendered in the protocol (for the offline policy and test servers), and how the
canonical turns are turned back into chat messages. Context management lives here once: the last
`keep_last_observations` tool results are shown in full, older ones inside the last `keep_last_turns`
turns are elided, and turns before that are folded into a bounded progress note, so the prompt stays
bounded however long the trajectory grows.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from abc import ABC, abstractmethod
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from llm.client import json_object_in
from schemas.trajectory import ToolCall, Turn
from synth.tools import TOOL_ARGS, tool_specs

ANSWER_TOOL = "answer"
NOTE_ITEMS = 8
NOTE_ITEM_CHARS = 80
NOTE_SCAN_TURNS = 100
_BOXED = re.compile(r"\\boxed\{((?:[^{}]|\{[^{}]*\})*)\}")
_FINAL_LINE = re.compile(r"(?im)^\s*(?:\*\*)?final answer(?:\*\*)?\s*[:：]\s*(.+)$")
MAX_PLAIN_ANSWER_CHARS = 300
MAX_PLAIN_ANSWER_WORDS = 8


@dataclass
class ModelOutput:
    """One model response as received: text content plus native tool calls ({id, name, arguments})."""

    content: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ParsedTurn:
    reasoning: str
    tool_call: ToolCall | None = None
    parse_error: str | None = None


@dataclass(frozen=True)
class ContextWindow:
    """How much history a prompt carries: full observations, then elided ones, then a folded note."""

    keep_last_observations: int = 5
    keep_last_turns: int = 20


def primary_argument(tool: str) -> str | None:
    """The argument a bare string stands for (`search: Chicago` means query="Chicago")."""
    model = TOOL_ARGS.get(tool)
    if model is None:
        return None
    required = [name for name, info in model.model_fields.items() if info.is_required()]
    return required[0] if len(required) == 1 else None


loads_object = json_object_in


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def echoes(text: str, prompt: str) -> bool:
    """Whether a reply only repeats our own prompt (a base model continuing the reminder, the question)."""
    words = _words(text)
    if not words:
        return True
    return f" {' '.join(words)} " in f" {' '.join(_words(prompt))} "


def final_answer_text(text: str) -> str | None:
    """The final answer a model wrote as prose: `\\boxed{..}`, a `Final answer:` line, or a bare short answer.

    A bare reply counts only when it reads like an answer: one line of at most MAX_PLAIN_ANSWER_WORDS
    words and not a question; anything longer is a ramble, which gets the format reminder instead of being
    taken as the answer. (An answer that only echoes the prompt is refused by the episode loop.)
    """
    boxed = _BOXED.findall(text)
    if boxed:
        answer = boxed[-1].strip()
    elif (line := _FINAL_LINE.search(text)) is not None:
        answer = line.group(1).strip()
    else:
        answer = text.strip().strip("*`").strip()
        if "\n" in answer or len(_words(answer)) > MAX_PLAIN_ANSWER_WORDS or answer.endswith("?"):
            return None
    if not answer or len(answer) > MAX_PLAIN_ANSWER_CHARS:
        return None
    return answer


def answer_call(call_id: str, text: str) -> ToolCall:
    return ToolCall(call_id=call_id, name=ANSWER_TOOL, arguments={"text": text})


@cache
def tools_json_lines() -> str:
    """The tool declarations, one JSON object a line, as tag and text protocols list them."""
    return "\n".join(json.dumps(spec, ensure_ascii=False) for spec in tool_specs())


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= NOTE_ITEM_CHARS else text[: NOTE_ITEM_CHARS - 3] + "..."


def progress_note(folded: list[Turn]) -> str:
    """A bounded summary of folded turns: counts per tool and the latest distinct arguments of each.

    Only the newest folded turns are scanned for arguments, so building a prompt stays cheap at turn 600.
    """
    counts = Counter(turn.tool_call.name if turn.tool_call else "unparsed output" for turn in folded)
    recent: dict[str, list[str]] = {}
    for turn in reversed(folded[-NOTE_SCAN_TURNS:]):
        if turn.tool_call is None:
            continue
        shown = _short(json.dumps(turn.tool_call.arguments, ensure_ascii=False, sort_keys=True))
        items = recent.setdefault(turn.tool_call.name, [])
        if shown not in items and len(items) < NOTE_ITEMS:
            items.append(shown)
    lines = [
        f"[Context note: your first {len(folded)} turns were folded to save space. "
        + ", ".join(f"{name}: {n}" for name, n in sorted(counts.items())) + ".]"
    ]
    for name, items in sorted(recent.items()):
        lines.append(f"Latest {name} calls: " + "; ".join(reversed(items)))
    return "\n".join(lines)


def elided(observation: str) -> str:
    return f"[observation elided to save context: {len(observation)} characters; repeat the call to see it again]"


class Framework(ABC):
    """One agent protocol. Subclasses define the prompt, parsing, rendering and message shapes."""

    name: str

    @abstractmethod
    def system_prompt(self, as_of: dt.date) -> str: ...

    def request_tools(self) -> list[dict[str, Any]] | None:
        """The `tools` sent with each request (native function calling only)."""
        return None

    @abstractmethod
    def parse(self, output: ModelOutput, call_id: str) -> ParsedTurn: ...

    def prompt_text(self, question: str) -> str:
        """Our own text a model may echo back as an "answer": the question, the reminder, the error feedback.

        The system prompt is left out: its worked example ("Paris") may well be a real answer.
        """
        return "\n".join((self.user_prompt(question), self.format_reminder, "Error: your output could not be parsed"))

    @abstractmethod
    def render(self, reasoning: str, name: str, arguments_json: str, call_id: str) -> ModelOutput:
        """A call in this protocol, arguments given as JSON text (so a caller can render broken JSON)."""

    def raw_output(self, output: ModelOutput) -> str:
        """The model's output verbatim, as stored in Turn.raw_output."""
        return output.content

    def output_of(self, turn: Turn) -> ModelOutput:
        """The inverse of `raw_output`: the model output a recorded turn came from."""
        return ModelOutput(content=turn.raw_output)

    @abstractmethod
    def assistant_message(self, turn: Turn) -> dict[str, Any]: ...

    @abstractmethod
    def result_messages(self, turn: Turn, text: str) -> list[dict[str, Any]]:
        """The message(s) that carry a turn's observation (or its parse error) back to the model."""

    def feedback_text(self, turn: Turn) -> str:
        """What the model is told after a turn; parse errors get the protocol reminder."""
        if turn.parse_error is not None:
            return f"Error: your output could not be parsed ({turn.parse_error}). {self.format_reminder}"
        return turn.observation or ""

    format_reminder: str = ""

    def user_prompt(self, question: str) -> str:
        return f"Question: {question}"

    text_protocol = True  # calls are written in the reply's text (False: native tool_calls)

    def example_messages(self, question: str, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A worked episode as this protocol's chat turns: the user prompt, then each reply and its result.

        `steps` hold `reasoning`, `tool`, `arguments` and (but for the last) `observation`; a few-shot
        example for a model that follows a format better when shown one. It ends with the model's reply,
        so the next user message keeps the turns alternating (only text protocols can show it that way).
        """
        if not self.text_protocol:
            raise ValueError(f"{self.name} calls tools natively; its calls cannot be shown as text turns")
        messages: list[dict[str, Any]] = [{"role": "user", "content": self.user_prompt(question)}]
        for index, step in enumerate(steps):
            output = self.render(step["reasoning"], step["tool"], json.dumps(step["arguments"], ensure_ascii=False),
                                 f"call_{index}")
            turn = Turn(index=index, reasoning=step["reasoning"], raw_output=self.raw_output(output),
                        observation=step.get("observation"))
            messages.append(self.assistant_message(turn))
            if turn.observation is not None:
                messages.extend(self.result_messages(turn, turn.observation))
        return messages

    def build_messages(self, question: str, as_of: dt.date, turns: list[Turn], window: ContextWindow) -> list[dict[str, Any]]:
        """The prompt for the next turn, with bounded history (see the module docstring)."""
        folded_count = max(0, len(turns) - window.keep_last_turns)
        user = self.user_prompt(question)
        if folded_count:
            user += "\n\n" + progress_note(turns[:folded_count])
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": self.system_prompt(as_of)},
            {"role": "user", "content": user},
        ]
        for position in range(folded_count, len(turns)):
            turn = turns[position]
            messages.append(self.assistant_message(turn))
            text = self.feedback_text(turn)
            if turn.parse_error is None and len(turns) - position > window.keep_last_observations:
                text = elided(text)
            messages.extend(self.result_messages(turn, text))
        return messages
