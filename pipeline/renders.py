"""Renders of the canonical `JudgedTrajectory` into the training formats of the published configs.

Every render is a pure function of one judged trajectory (or one question), so the configs cannot drift
apart. All renders share one projection of a trajectory, `turn_views`: per assistant turn its reasoning,
its tool call (name and arguments), the observation it got back, or its final answer, or, for output the
framework could not parse, the raw text. A render is lossless when its parser gives back exactly those
views (tests prove it for `toolmind`, `nanbeige` and `openai`).

Conventions shared by the renders:
- the system turn lists every tool the environment runs, `answer` included (`render_tools`, i.e.
  `synth.tools.tool_specs()`), and says "Today is: <as_of>"; the user turn is the question;
- an assistant turn is `<think>\\n{reasoning}\\n</think>\\n\\n` followed by exactly one tool call in the
  render's protocol; the tool result comes back as the next user (or `tool`) message;
- the final turn (the trajectory's last turn, when it gave an answer) is the thinking plus `\\boxed{answer}`;
- the SFT renders (toolmind, nanbeige, openai, turns) hold only well-formed turns (`well_formed`): a turn
  whose output could not be parsed, or whose call's arguments fail its tool's schema (the injected
  `malformed_arguments` turns among them), is left out together with the error it got back, so every
  assistant message is in its row's protocol and every call passes a strict loader. The `trajectories`
  config keeps them, and so does RL's tokenisation (`nanbeige_messages(..., keep_malformed=True)`), where an
  unparsed turn is the model's raw output followed by the environment's error (`parse_error_feedback`)
  in the format's tool-result slot;
- `loss` is the critic's `loss_mask` on assistant turns and 0 on every other message;
- observations are page text, i.e. untrusted: `neutralise` escapes the chat template's control tokens
  (`<|im_start|>` ...) and the tool protocols' tags (`<tool_response>`, `<use_mcp_tool>` ...) in them, so a
  page cannot close its tool result and forge turns in any render or in RL tokenisation.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any, Literal

from schemas.critic import JudgedTrajectory, TurnJudgement
from schemas.dataset import (
    PASS_RATE_FIELDS,
    ConversationMessage,
    NanbeigeRow,
    OpenAIFunction,
    OpenAIMessage,
    OpenAIRow,
    OpenAIToolCall,
    ProducedBy,
    PromptMessage,
    QuestionRow,
    RLPrompt,
    ToolMindRow,
    TurnRow,
)
from schemas.questions import Question
from schemas.trajectory import Trajectory, Turn
from synth.tools import tool_specs, validate_call

SERVER_NAME = "wiki"
ANSWER_TOOL = "answer"
TurnKind = Literal["call", "final", "unparsed"]

_THINK = re.compile(r"\A<think>\n(?P<reasoning>.*?)\n</think>\n\n(?P<rest>.*)\Z", re.DOTALL)
_BOXED = re.compile(r"\A\\boxed\{(?P<answer>.*)\}\Z", re.DOTALL)
_MCP_CALL = re.compile(
    r"\A<use_mcp_tool>\n<server_name>(?P<server>[^<]*)</server_name>\n<tool_name>(?P<tool>[^<]*)</tool_name>\n"
    r"<arguments>\n(?P<arguments>.*)\n</arguments>\n</use_mcp_tool>\Z",
    re.DOTALL,
)
_TOOL_CALL = re.compile(r"\A<tool_call>\n(?P<payload>.*)\n</tool_call>\Z", re.DOTALL)
_TOOL_RESPONSE = re.compile(r"\A<tool_response>\n(?P<observation>.*)\n</tool_response>\Z", re.DOTALL)
# special tokens of ChatML-style templates (`<|im_start|>`, `<|im_end|>`, `<|endoftext|>`, ...)
CONTROL_TOKEN = re.compile(r"<\|[^<>|\s]{1,64}\|>")
# tags of the renders' tool protocols (Qwen3/hermes, MCP) and of the thinking block
PROTOCOL_TAGS = ("think", "tools", "tool_call", "tool_response", "use_mcp_tool", "server_name", "tool_name",
                 "arguments")
PROTOCOL_TAG = re.compile(r"</?\s*(?:" + "|".join(PROTOCOL_TAGS) + r")\s*/?>", re.IGNORECASE)
_ESCAPES = str.maketrans({"<": "&lt;", ">": "&gt;"})


def neutralise_control_tokens(text: str) -> str:
    """`<|im_start|>` -> `&lt;|im_start|&gt;`: the text reads the same, but no tokenizer sees a special token."""
    return CONTROL_TOKEN.sub(lambda match: match.group(0).translate(_ESCAPES), text)


def neutralise(text: str) -> str:
    """Untrusted text (an observation) with control tokens and protocol tags escaped; idempotent."""
    return PROTOCOL_TAG.sub(lambda match: match.group(0).translate(_ESCAPES), neutralise_control_tokens(text))


@dataclass(frozen=True)
class TurnView:
    """What every render keeps of one assistant turn; equality of views is the round-trip criterion."""

    kind: TurnKind
    reasoning: str = ""
    name: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    observation: str = ""
    answer: str | None = None
    raw_output: str | None = None


@dataclass(frozen=True)
class ParsedConversation:
    """A render parsed back: the system prompt, the question and one view per assistant turn."""

    system: str
    question: str
    turns: list[TurnView]
    loss: list[int]


def _final_answer(turn: Turn) -> str | None:
    if turn.final_answer is not None:
        return turn.final_answer
    if turn.tool_call is not None and turn.tool_call.name == ANSWER_TOOL and well_formed(turn):
        return turn.tool_call.arguments["text"]
    return None


def well_formed(turn: Turn) -> bool:
    """A final answer, or one call whose arguments fit its tool's schema: what a strict loader accepts."""
    if turn.final_answer is not None:
        return True
    return turn.tool_call is not None and validate_call(turn.tool_call.name, turn.tool_call.arguments)[1] is None


def parse_error_feedback(turn: Turn) -> str:
    """What the environment answers an unparsable output with (its recorded observation when it has one)."""
    if turn.observation is not None:
        return neutralise(turn.observation)
    reason = turn.parse_error or "no tool call found"
    return neutralise(
        f"Error: your output could not be parsed ({reason}). Reply with one tool call in the required format."
    )


def rendered_turns(trajectory: Trajectory, keep_malformed: bool = False) -> list[Turn]:
    """The turns a render holds: the well-formed ones (SFT renders), or all of them (`keep_malformed`)."""
    return list(trajectory.turns) if keep_malformed else [t for t in trajectory.turns if well_formed(t)]


def turn_views(trajectory: Trajectory, keep_malformed: bool = False) -> list[TurnView]:
    """The canonical projection of a render's turns (`rendered_turns`) that every render preserves."""
    views = []
    last = len(trajectory.turns) - 1
    for turn in rendered_turns(trajectory, keep_malformed):
        position = turn.index
        answer = _final_answer(turn)
        if position == last and answer is not None:
            views.append(TurnView(kind="final", reasoning=turn.reasoning, answer=answer))
        elif turn.tool_call is None:
            views.append(
                TurnView(kind="unparsed", observation=parse_error_feedback(turn), raw_output=turn.raw_output)
            )
        else:
            views.append(
                TurnView(
                    kind="call",
                    reasoning=turn.reasoning,
                    name=turn.tool_call.name,
                    arguments=turn.tool_call.arguments,
                    observation=neutralise(turn.observation or ""),
                )
            )
    return views


def produced_by(judged: JudgedTrajectory, judgements: list[TurnJudgement] | None = None) -> ProducedBy:
    """The engines (and served models) behind a trajectory's row, or behind the rows of `judgements`."""
    judgements = judged.judgements if judgements is None else judgements
    judge = next((j for j in judgements if j.model), judgements[0] if judgements else None)
    return ProducedBy(policy_engine=judged.trajectory.engine, policy_model=judged.trajectory.model,
                      judge_engine=judge.engine if judge else None, judge_model=judge.model if judge else None)


def turn_loss(judged: JudgedTrajectory, keep_malformed: bool = False) -> list[int]:
    """The critic's loss mask per rendered turn (0 for a turn the critic did not judge: never train on the
    unknown)."""
    by_index = {j.turn_index: j.loss_mask for j in judged.judgements}
    return [int(by_index.get(turn.index, 0)) for turn in rendered_turns(judged.trajectory, keep_malformed)]


def turn_rewards(judged: JudgedTrajectory, keep_malformed: bool = False) -> list[float]:
    by_index = {j.turn_index: j.reward for j in judged.judgements}
    return [float(by_index.get(turn.index, 0.0)) for turn in rendered_turns(judged.trajectory, keep_malformed)]


@cache
def _render_tools_json() -> str:
    return json.dumps(tool_specs())


def render_tools() -> list[dict[str, Any]]:
    """The tools the renders declare: every tool the environment runs, so a call to `answer` (which ends
    the episode like a `\\boxed{}` reply) is always a declared one."""
    return json.loads(_render_tools_json())


def _arguments_json(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, ensure_ascii=False)


def _thinking(reasoning: str, rest: str) -> str:
    return f"<think>\n{reasoning}\n</think>\n\n{rest}"


def boxed(answer: str) -> str:
    return f"\\boxed{{{answer}}}"


# ---------------------------------------------------------------- toolmind (ToolMind-Web-QA, MCP calls)


@cache
def toolmind_system_prompt(as_of: str) -> str:
    """The ToolMind/MiroThinker-style system prompt: MCP tool-use instructions, the tools, today's date."""
    lines = [
        "In this environment you have access to a set of tools you can use to answer the user's question.",
        "",
        "You only have access to the tools provided below. You can only use one tool per message, and will "
        "receive the result of that tool in the user's next response. You use tools step-by-step to "
        "accomplish a given task, with each tool-use informed by the result of the previous tool-use. "
        f"Today is: {as_of}",
        "",
        "# Tool-Use Formatting Instructions",
        "",
        "Tool-use is formatted using XML-style tags. The tool-use is enclosed in <use_mcp_tool></use_mcp_tool> "
        "and each parameter is similarly enclosed within its own set of tags:",
        "",
        "<use_mcp_tool>",
        "<server_name>server name here</server_name>",
        "<tool_name>tool name here</tool_name>",
        "<arguments>",
        '{"param1": "value1"}',
        "</arguments>",
        "</use_mcp_tool>",
        "",
        "When you know the answer, reply with it in \\boxed{} and call no tool (or call `answer`).",
        "",
        "## Server name: " + SERVER_NAME,
    ]
    for spec in render_tools():
        function = spec["function"]
        lines += [
            "",
            f"### Tool name: {function['name']}",
            f"Description: {function['description']}",
            f"Input JSON schema: {json.dumps(function['parameters'], ensure_ascii=False)}",
        ]
    return "\n".join(lines)


def _mcp_call(name: str, arguments: dict[str, Any]) -> str:
    return (
        f"<use_mcp_tool>\n<server_name>{SERVER_NAME}</server_name>\n<tool_name>{name}</tool_name>\n"
        f"<arguments>\n{_arguments_json(arguments)}\n</arguments>\n</use_mcp_tool>"
    )


def _text_turn_content(view: TurnView, call_text) -> str:
    if view.kind == "final":
        return _thinking(view.reasoning, boxed(view.answer or ""))
    if view.kind == "unparsed":
        return view.raw_output or ""
    return _thinking(view.reasoning, call_text(view.name, view.arguments))


def _text_conversation(
    system: str, question: str, views: list[TurnView], loss: list[int], call_text, observation_text
) -> list[ConversationMessage]:
    messages = [
        ConversationMessage(role="system", content=system, loss=0),
        ConversationMessage(role="user", content=question, loss=0),
    ]
    for view, turn_loss_value in zip(views, loss, strict=True):
        messages.append(
            ConversationMessage(
                role="assistant", content=_text_turn_content(view, call_text), loss=turn_loss_value
            )
        )
        if view.kind != "final":
            messages.append(
                ConversationMessage(role="user", content=observation_text(view.observation), loss=0)
            )
    return messages


def toolmind_conversation(judged: JudgedTrajectory) -> list[ConversationMessage]:
    """The well-formed turns in ToolMind-Web's MCP protocol (an SFT render: `rendered_turns`)."""
    trajectory = judged.trajectory
    return _text_conversation(
        toolmind_system_prompt(trajectory.as_of.isoformat()),
        trajectory.question,
        turn_views(trajectory),
        turn_loss(judged),
        _mcp_call,
        lambda observation: observation,
    )


def render_toolmind(judged: JudgedTrajectory) -> ToolMindRow:
    """A ToolMind-Web-QA row: `key` is the trajectory id, `id` the question id."""
    trajectory = judged.trajectory
    return ToolMindRow(
        key=trajectory.trajectory_id, id=trajectory.question_id, conversations=toolmind_conversation(judged)
    )


def _parse_call_content(content: str, parse_call) -> TurnView:
    """An assistant message of a text render back to a view (final, call, or unparsed raw output)."""
    match = _THINK.match(content)
    if match:
        rest = match.group("rest")
        answer = _BOXED.match(rest)
        if answer:
            return TurnView(kind="final", reasoning=match.group("reasoning"), answer=answer.group("answer"))
        call = parse_call(rest)
        if call is not None:
            name, arguments = call
            return TurnView(kind="call", reasoning=match.group("reasoning"), name=name, arguments=arguments)
    return TurnView(kind="unparsed", raw_output=content)


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def parse_mcp_call(text: str) -> tuple[str, dict[str, Any]] | None:
    """`<use_mcp_tool>...</use_mcp_tool>` -> (tool name, arguments), or None when malformed."""
    match = _MCP_CALL.match(text)
    if not match or match.group("server") != SERVER_NAME:
        return None
    arguments = _json_object(match.group("arguments"))
    return None if arguments is None else (match.group("tool"), arguments)


def _parse_text_conversation(
    messages: list[dict[str, Any]], parse_call, parse_observation
) -> ParsedConversation:
    roles = [m["role"] for m in messages]
    if roles[:2] != ["system", "user"]:
        raise ValueError(f"a conversation starts with system, user; got {roles[:2]}")
    turns: list[TurnView] = []
    loss: list[int] = []
    position = 2
    while position < len(messages):
        message = messages[position]
        if message["role"] != "assistant":
            raise ValueError(f"message {position}: expected assistant, got {message['role']}")
        view = _parse_call_content(message["content"], parse_call)
        loss.append(int(message["loss"]))
        position += 1
        if view.kind != "final":
            if position >= len(messages) or messages[position]["role"] != "user":
                raise ValueError(f"message {position}: a tool call must be followed by its result")
            view = replace(view, observation=parse_observation(messages[position]["content"]))
            position += 1
        elif position != len(messages):
            raise ValueError("the final answer must be the last message")
        turns.append(view)
    return ParsedConversation(messages[0]["content"], messages[1]["content"], turns, loss)


def parse_toolmind(conversations: list[dict[str, Any]]) -> ParsedConversation:
    """Parse a `toolmind` conversation back into turn views (the round-trip check)."""
    return _parse_text_conversation(conversations, parse_mcp_call, lambda content: content)


# ---------------------------------------------------------------- nanbeige (Qwen3 ChatML tool template)


@cache
def nanbeige_system_prompt(as_of: str) -> str:
    """The system turn of the Nanbeige4.1/Qwen3 tool template: instructions, date, tools in `<tools>`."""
    tools = "\n".join(json.dumps(spec, ensure_ascii=False) for spec in render_tools())
    return (
        "You are a deep-search assistant. Answer the user's question by searching the encyclopedia step by "
        "step, one tool call per turn. When you know the answer, reply with it in \\boxed{} (or call `answer`)."
        f"\nToday is: {as_of}"
        "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n"
        f"<tools>\n{tools}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    )


def nanbeige_tool_call(name: str, arguments: dict[str, Any]) -> str:
    return (
        f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}\n</tool_call>"
    )


def nanbeige_tool_response(observation: str) -> str:
    """A tool result as the content of the user turn that carries it back to the model (neutralised)."""
    return f"<tool_response>\n{neutralise(observation)}\n</tool_response>"


def parse_nanbeige_call(text: str) -> tuple[str, dict[str, Any]] | None:
    """`<tool_call>\\n{"name": .., "arguments": {..}}\\n</tool_call>` -> (name, arguments), or None."""
    match = _TOOL_CALL.match(text)
    if not match:
        return None
    payload = _json_object(match.group("payload"))
    if payload is None or set(payload) != {"name", "arguments"}:
        return None
    if not isinstance(payload["name"], str) or not isinstance(payload["arguments"], dict):
        return None
    return payload["name"], payload["arguments"]


def parse_nanbeige_assistant(content: str) -> TurnView:
    """One assistant message in the nanbeige protocol -> a final answer, a tool call, or unparsed output."""
    return _parse_call_content(content, parse_nanbeige_call)


def _parse_tool_response(content: str) -> str:
    match = _TOOL_RESPONSE.match(content)
    if not match:
        raise ValueError("a tool result must be wrapped in <tool_response>...</tool_response>")
    return match.group("observation")


def nanbeige_messages(judged: JudgedTrajectory, keep_malformed: bool = False) -> list[ConversationMessage]:
    """The trajectory as Nanbeige4.1 chat messages `{role, content, loss}`; its `loss` is the critic's mask.

    The k-th assistant message is the k-th rendered turn: the k-th well-formed one in the `nanbeige` config,
    trajectory turn k with `keep_malformed` (RL tokenises these: a malformed turn is penalised there).
    """
    trajectory = judged.trajectory
    return _text_conversation(
        nanbeige_system_prompt(trajectory.as_of.isoformat()),
        trajectory.question,
        turn_views(trajectory, keep_malformed),
        turn_loss(judged, keep_malformed),
        nanbeige_tool_call,
        nanbeige_tool_response,
    )


def render_nanbeige(judged: JudgedTrajectory) -> NanbeigeRow:
    trajectory = judged.trajectory
    return NanbeigeRow(
        trajectory_id=trajectory.trajectory_id,
        question_id=trajectory.question_id,
        framework=trajectory.framework,
        messages=nanbeige_messages(judged),
        turn_rewards=turn_rewards(judged),
        outcome_reward=judged.outcome_reward,
        correct=trajectory.outcome.correct,
        produced_by=produced_by(judged),
    )


def parse_nanbeige(messages: list[dict[str, Any]]) -> ParsedConversation:
    return _parse_text_conversation(messages, parse_nanbeige_call, _parse_tool_response)


# ---------------------------------------------------------------- openai (tool_calls, tool messages)


def openai_system_prompt(as_of: str) -> str:
    return (
        "You are a deep-search assistant. Answer the user's question by searching the encyclopedia step by "
        "step with the tools, one call per turn. When you know the answer, reply with it in \\boxed{} and "
        f"call no tool (or call `answer`).\nToday is: {as_of}"
    )


def _call_id(turn: Turn) -> str:
    return (
        turn.tool_call.call_id
        if turn.tool_call is not None and turn.tool_call.call_id
        else f"call_{turn.index}"
    )


def openai_messages(judged: JudgedTrajectory) -> list[OpenAIMessage]:
    """The well-formed turns as OpenAI messages: each call answered by its `tool` message, so no `user`
    message ever follows the question (Qwen3-style templates keep every earlier `<think>` only then)."""
    trajectory = judged.trajectory
    messages = [
        OpenAIMessage(role="system", content=openai_system_prompt(trajectory.as_of.isoformat())),
        OpenAIMessage(role="user", content=trajectory.question),
    ]
    turns = rendered_turns(trajectory)
    for turn, view, loss in zip(turns, turn_views(trajectory), turn_loss(judged), strict=True):
        if view.kind == "final":
            messages.append(
                OpenAIMessage(
                    role="assistant",
                    content=boxed(view.answer or ""),
                    reasoning_content=view.reasoning,
                    loss=loss,
                )
            )
        else:
            call = OpenAIToolCall(
                id=_call_id(turn),
                function=OpenAIFunction(name=view.name, arguments=_arguments_json(view.arguments)),
            )
            messages.append(
                OpenAIMessage(
                    role="assistant",
                    content="",
                    reasoning_content=view.reasoning,
                    tool_calls=[call],
                    loss=loss,
                )
            )
            messages.append(OpenAIMessage(role="tool", tool_call_id=call.id, content=view.observation))
    return messages


def render_openai(judged: JudgedTrajectory) -> OpenAIRow:
    trajectory = judged.trajectory
    messages = openai_messages(judged)
    return OpenAIRow(
        trajectory_id=trajectory.trajectory_id,
        question_id=trajectory.question_id,
        framework=trajectory.framework,
        messages=messages,
        tools=render_tools(),
        outcome_reward=judged.outcome_reward,
        correct=trajectory.outcome.correct,
        produced_by=produced_by(judged),
    )


def parse_openai(messages: list[dict[str, Any]]) -> ParsedConversation:
    """Parse an `openai` render back into turn views; checks each tool message answers the call before it."""
    if [m["role"] for m in messages[:2]] != ["system", "user"]:
        raise ValueError("a conversation starts with system, user")
    turns: list[TurnView] = []
    loss: list[int] = []
    position = 2
    while position < len(messages):
        message = messages[position]
        if message["role"] != "assistant":
            raise ValueError(f"message {position}: expected assistant, got {message['role']}")
        loss.append(int(message.get("loss") or 0))
        calls = message.get("tool_calls") or []
        following = messages[position + 1] if position + 1 < len(messages) else None
        if calls:
            (call,) = calls
            if following is None or following["role"] != "tool" or following["tool_call_id"] != call["id"]:
                raise ValueError(f"message {position}: tool call {call['id']} has no tool result")
            arguments = json.loads(call["function"]["arguments"])
            turns.append(
                TurnView(
                    kind="call",
                    reasoning=message.get("reasoning_content") or "",
                    name=call["function"]["name"],
                    arguments=arguments,
                    observation=following["content"] or "",
                )
            )
            position += 2
            continue
        answer = _BOXED.match(message.get("content") or "")
        if answer and message.get("reasoning_content") is not None and following is None:
            turns.append(
                TurnView(kind="final", reasoning=message["reasoning_content"], answer=answer.group("answer"))
            )
            position += 1
            continue
        raise ValueError(f"message {position}: an assistant message holds one tool call or, last, the answer")
    return ParsedConversation(messages[0]["content"], messages[1]["content"], turns, loss)


# ---------------------------------------------------------------- turns (one row per kept assistant turn)


def render_turns(judged: JudgedTrajectory) -> list[TurnRow]:
    """One row per critic-approved assistant turn: the toolmind conversation prefix ending at that turn.

    Only the last message of a row carries loss 1; earlier turns (kept or failed) are context.
    """
    trajectory = judged.trajectory
    conversation = toolmind_conversation(judged)
    rewards = turn_rewards(judged)
    rows = []
    assistant_positions = [i for i, m in enumerate(conversation) if m.role == "assistant"]
    judgements = {j.turn_index: j for j in judged.judgements}
    for turn, position, reward in zip(rendered_turns(trajectory), assistant_positions, rewards, strict=True):
        if conversation[position].loss != 1:
            continue
        prefix = [m.model_copy(update={"loss": 0}) for m in conversation[:position]]
        prefix.append(conversation[position])
        rows.append(
            TurnRow(
                key=f"{trajectory.trajectory_id}:{turn.index}",
                trajectory_id=trajectory.trajectory_id,
                question_id=trajectory.question_id,
                framework=trajectory.framework,
                turn_index=turn.index,
                conversations=prefix,
                reward=reward,
                produced_by=produced_by(judged, [judgements[turn.index]]),
            )
        )
    return rows


# ---------------------------------------------------------------- rl (prompts to roll out)


def render_rl(question: Question, environment: str) -> RLPrompt:
    """An RL prompt in the nanbeige template, with gold answers and the search environment to launch; a
    `questions` row (`QuestionRow`) passes on its pass rate, a bare question has none."""
    as_of = question.as_of.isoformat()
    measured = {name: getattr(question, name) for name in PASS_RATE_FIELDS} if isinstance(question, QuestionRow) else {}
    return RLPrompt(
        prompt_id=question.question_id,
        question_id=question.question_id,
        prompt=[
            PromptMessage(role="system", content=nanbeige_system_prompt(as_of)),
            PromptMessage(role="user", content=question.text),
        ],
        answer=question.answer,
        aliases=question.aliases,
        as_of=question.as_of,
        hops=question.hops,
        environment=environment,
        tools=render_tools(),
        writer_engine=question.engine,
        writer_model=question.model,
        **measured,
    )
