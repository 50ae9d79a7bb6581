"""Token rendering of the Nanbeige template: loss mask and turn ids on hand-checked spans, prefix property."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from pipeline.renders import nanbeige_tool_call, nanbeige_tool_response  # noqa: E402
from rl.chat import (  # noqa: E402
    IM_END,
    PrefixPropertyError,
    check_full_encoding,
    check_prefix_property,
    render_text,
    render_tokens,
)
from rl.data import build_examples, trajectory_messages  # noqa: E402
from rl.tokenizer import train_tokenizer  # noqa: E402
from tests.rl_fixtures import fixture_trajectories  # noqa: E402

CALL = "<think>\nLook it up.\n</think>\n\n" + nanbeige_tool_call("search", {"query": "Obama"})
ANSWER = "<think>\nFound it.\n</think>\n\n\\boxed{Chicago}"
MESSAGES = [
    {"role": "system", "content": "You search. Today is: 2026-06-01"},
    {"role": "user", "content": "Where was Michelle Obama born?"},
    {"role": "assistant", "content": CALL},
    {"role": "user", "content": nanbeige_tool_response("Michelle Obama grew up in Chicago.")},
    {"role": "assistant", "content": ANSWER},
]


@pytest.fixture(scope="module")
def tokenizer():
    corpus = [render_text(trajectory_messages(j)) for j in fixture_trajectories()] + [render_text(MESSAGES)]
    return train_tokenizer(corpus, vocab_size=600)


def encode(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


def test_loss_mask_and_turn_ids_cover_exactly_the_assistant_spans(tokenizer):
    rendered = render_tokens(tokenizer, MESSAGES)
    # Hand-checked spans: everything up to and including "<|im_start|>assistant\n" is context; the call
    # and its <|im_end|> train as turn 0; "\n", the tool response turn and the next header are context;
    # the answer and its <|im_end|> train as turn 1; the final "\n" is context.
    before_first = encode(tokenizer, "<|im_start|>system\nYou search. Today is: 2026-06-01<|im_end|>\n"
                                     "<|im_start|>user\nWhere was Michelle Obama born?<|im_end|>\n<|im_start|>assistant\n")
    first = encode(tokenizer, CALL + IM_END)
    between = encode(tokenizer, "\n<|im_start|>user\n" + nanbeige_tool_response("Michelle Obama grew up in Chicago.")
                     + "<|im_end|>\n<|im_start|>assistant\n")
    second = encode(tokenizer, ANSWER + IM_END)
    expected_ids = before_first + first + between + second + encode(tokenizer, "\n")
    assert rendered.input_ids == expected_ids
    expected_mask = [0] * len(before_first) + [1] * len(first) + [0] * len(between) + [1] * len(second) + [0]
    assert rendered.loss_mask == expected_mask
    expected_turns = [-1] * len(before_first) + [0] * len(first) + [-1] * len(between) + [1] * len(second) + [-1]
    assert rendered.turn_ids == expected_turns
    trained = tokenizer.decode([t for t, m in zip(rendered.input_ids, rendered.loss_mask, strict=True) if m])
    assert trained == CALL + IM_END + ANSWER + IM_END
    assert "<tool_response>" not in trained and "<|im_start|>" not in trained


def test_token_rendering_equals_the_text_template_and_the_saved_chat_template(tokenizer, tmp_path):
    rendered = render_tokens(tokenizer, MESSAGES)
    assert tokenizer.decode(rendered.input_ids) == render_text(MESSAGES)
    assert tokenizer.apply_chat_template(MESSAGES, tokenize=False) == render_text(MESSAGES)
    assert tokenizer.apply_chat_template(MESSAGES[:2], tokenize=False, add_generation_prompt=True) == \
        render_text(MESSAGES[:2]) + "<|im_start|>assistant\n"
    tokenizer.save_pretrained(tmp_path)
    from transformers import AutoTokenizer

    reloaded = AutoTokenizer.from_pretrained(tmp_path)
    assert reloaded.encode(render_text(MESSAGES), add_special_tokens=False) == rendered.input_ids


def test_each_prefix_extends_the_previous_one(tokenizer):
    for judged in fixture_trajectories():
        messages = trajectory_messages(judged)
        rendered = render_tokens(tokenizer, messages)
        check_prefix_property(tokenizer, messages, rendered)
        ends = rendered.message_ends
        for k in range(1, len(ends)):
            shorter = encode(tokenizer, render_text(messages[:k]))
            longer = encode(tokenizer, render_text(messages[: k + 1]))
            assert longer[: len(shorter)] == shorter


def test_prefix_check_catches_a_merge_across_the_header():
    # With "\n\n" learned as one token, content starting with blank lines merges with the header's newline
    # when the whole text is encoded, so segment-wise ids are no longer what an engine would see.
    tokenizer = train_tokenizer(["paragraph\n\n\nparagraph\n\n" * 50, render_text(MESSAGES)], vocab_size=300)
    assert len(encode(tokenizer, "\n\n")) == 1
    check_prefix_property(tokenizer, MESSAGES, render_tokens(tokenizer, MESSAGES))
    messages = MESSAGES[:2] + [{"role": "assistant", "content": "\n\n" + CALL}]
    for check in (check_prefix_property, check_full_encoding):
        with pytest.raises(PrefixPropertyError):
            check(tokenizer, messages, render_tokens(tokenizer, messages))


def test_examples_carry_the_critic_signals_per_turn(tokenizer):
    examples, counts = build_examples(fixture_trajectories(), tokenizer, max_len=4096)
    assert counts == {"kept": 4, "truncated": 0, "prefix_checked": 4}
    bad = next(e for e in examples if e.trajectory_id == "q-spouse-birthplace-r1")
    assert bad.turn_rewards == [0.6, 0.0, 0.0]
    assert bad.turn_passed == [True, False, False]
    assert bad.outcome_reward == 0.0
    assert sorted(set(bad.turn_ids)) == [-1, 0, 1, 2]

    assert bad.criteria_passed["tool_accuracy"] == [True, True, True]
    assert bad.criteria_passed["information_gain"] == [True, False, False]

    short, counts = build_examples(fixture_trajectories()[:1], tokenizer, max_len=100, prefix_check_samples=0)
    assert counts == {"kept": 1, "truncated": 1, "prefix_checked": 0} and len(short[0].input_ids) == 100


def test_tokenizer_training_is_deterministic(tokenizer):
    corpus = [render_text(trajectory_messages(j)) for j in fixture_trajectories()] + [render_text(MESSAGES)]
    assert train_tokenizer(corpus, vocab_size=600).backend_tokenizer.to_str() == tokenizer.backend_tokenizer.to_str()
