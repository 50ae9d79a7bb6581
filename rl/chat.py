"""The Nanbeige (Qwen3-style ChatML) chat template, rendered to token ids with a loss mask and turn ids.

A conversation is a list of `{"role", "content"}` messages whose contents already hold the template's
inner markup (`<tools>` in the system turn, `<tool_call>` in assistant turns, `<tool_response>` in user
turns): `pipeline.renders.nanbeige_messages` writes them. Each message renders as
`<|im_start|>{role}\n{content}<|im_end|>\n`.

Content of system, user and tool messages is never parsed for special tokens: its control tokens are
escaped (`pipeline.renders.neutralise_control_tokens`), so text quoted from a page cannot open or close a
turn; only the template's own headers and ends, and what the policy sampled, are control tokens.

Token rendering goes segment by segment (header, content, end, separator), so every token belongs to
exactly one segment and the masks are exact: an assistant message's content and its `<|im_end|>` (the
policy samples that stop token) are trainable; headers, separators, system, user and tool-response
tokens are not. `check_prefix_property` proves the segment-wise ids equal the tokenizer's encoding of
every conversation prefix's full text, i.e. what a rollout engine sees at each turn extends what it
saw at the previous one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.renders import neutralise_control_tokens

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
PAD = "<|endoftext|>"
SPECIAL_TOKENS = (PAD, IM_START, IM_END)
MARKUP_TOKENS = ("<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>",
                 "<tools>", "</tools>")

# The same rendering as a Jinja chat template, saved with the tokenizer so vLLM/verl render identically.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


def message_header(role: str) -> str:
    return f"{IM_START}{role}\n"


def message_content(message: dict[str, str]) -> str:
    """What a message contributes between its header and end: non-assistant text with control tokens escaped."""
    content = message["content"]
    return content if message["role"] == "assistant" else neutralise_control_tokens(content)


def render_text(messages: list[dict[str, str]], add_generation_prompt: bool = False) -> str:
    """The conversation as template text (what `apply_chat_template(..., tokenize=False)` returns)."""
    text = "".join(f"{message_header(m['role'])}{message_content(m)}{IM_END}\n" for m in messages)
    return text + (message_header("assistant") if add_generation_prompt else "")


@dataclass
class RenderedConversation:
    """Token ids of a conversation, with what trains and which assistant turn each token belongs to.

    `loss_mask[i]` is 1 on assistant content and its `<|im_end|>`; `turn_ids[i]` is the index of the
    assistant message (0, 1, ...) the token belongs to, -1 on every other token. `message_ends[k]` is the
    token count after message k.
    """

    input_ids: list[int]
    loss_mask: list[int]
    turn_ids: list[int]
    message_ends: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.input_ids)


def _encode(tokenizer, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False)) if text else []


def render_tokens(tokenizer, messages: list[dict[str, str]]) -> RenderedConversation:
    """Render messages to ids segment by segment (what trains per turn is decided later, from the critic)."""
    ids: list[int] = []
    mask: list[int] = []
    turns: list[int] = []
    ends: list[int] = []
    assistant_index = -1
    for message in messages:
        is_assistant = message["role"] == "assistant"
        if is_assistant:
            assistant_index += 1
        turn = assistant_index if is_assistant else -1
        for text, in_turn in ((message_header(message["role"]), False), (message_content(message), True),
                              (IM_END, True), ("\n", False)):
            piece = _encode(tokenizer, text)
            ids += piece
            mask += [int(is_assistant and in_turn)] * len(piece)
            turns += [turn if in_turn else -1] * len(piece)
        ends.append(len(ids))
    return RenderedConversation(ids, mask, turns, ends)


class PrefixPropertyError(ValueError):
    """The tokenizer merges across a message boundary: a prefix's tokens are not a prefix of the next."""


def check_prefix_property(tokenizer, messages: list[dict[str, str]], rendered: RenderedConversation) -> None:
    """Every conversation prefix, encoded as full text, equals the segment-wise ids up to that message.

    This is what makes multi-turn rollouts trainable: the ids a rollout engine produced turn by turn (each
    prompt the previous prompt plus new tokens) are the ids the trainer scores. Since each prefix's
    encoding equals the ids up to its end, each prefix's encoding extends the previous one.
    """
    for k, end in enumerate(rendered.message_ends):
        if _encode(tokenizer, render_text(messages[: k + 1])) != rendered.input_ids[:end]:
            raise PrefixPropertyError(
                f"encoding of the first {k + 1} messages is not the segment-wise ids: the tokenizer merges "
                "across a message boundary"
            )


def check_full_encoding(tokenizer, messages: list[dict[str, str]], rendered: RenderedConversation) -> None:
    """The linear-time check: the whole conversation's encoding equals the segment-wise ids.

    With `<|im_start|>` a special token (the tokenizer splits text at it), this implies the per-prefix
    property at every message boundary; `check_prefix_property` verifies that explicitly.
    """
    if _encode(tokenizer, render_text(messages)) != rendered.input_ids:
        raise PrefixPropertyError("the encoding of the conversation is not the segment-wise ids")
