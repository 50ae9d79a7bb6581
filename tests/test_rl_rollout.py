"""The shared episode loop: token layout, environment and critic, and the verl reward layout built on it."""

from __future__ import annotations

import asyncio

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from critic.scoring import judge_trajectory  # noqa: E402
from pipeline.renders import nanbeige_tool_call, nanbeige_tool_response, render_rl  # noqa: E402
from rl.chat import IM_END, render_text  # noqa: E402
from rl.data import trajectory_messages  # noqa: E402
from rl.rollout import PARSE_ERROR, episode_trajectory, mask_failed_turns, prompt_ids, run_episode  # noqa: E402
from rl.tokenizer import train_tokenizer  # noqa: E402
from rl.verl_layout import place_turn_rewards, read_turn_rewards  # noqa: E402
from schemas.config import JudgeConfig  # noqa: E402
from tests.rl_fixtures import fixture_trajectories  # noqa: E402
from tests.trajectory_fixtures import QUESTIONS  # noqa: E402

SEARCH = "<think>\nFind who Michelle Obama is.\n</think>\n\n" + nanbeige_tool_call("search", {"query": "Michelle Obama"})
RAMBLE = "I am not sure what to do"
ANSWER = "<think>\nShe grew up in Chicago.\n</think>\n\n\\boxed{Chicago}"


@pytest.fixture(scope="module")
def environment(tmp_path_factory):
    from synth.environment import SearchEnvironment, build_index
    from tests.trajectory_fixtures import make_graph

    root = tmp_path_factory.mktemp("env")
    build_index(make_graph(root / "graph"), root / "index")
    return SearchEnvironment.load(root / "index")


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer([render_text(trajectory_messages(j)) for j in fixture_trajectories()], vocab_size=500)


def scripted(tokenizer, outputs: list[str]):
    """A sampler that answers with fixed texts, in turn (the last one cut off before <|im_end|>)."""
    replies = iter(outputs)
    contexts = []

    async def sample(context):
        contexts.append(list(context))
        return tokenizer.encode(next(replies), add_special_tokens=False), None

    return sample, contexts


def test_episode_tokens_are_the_template_rendering_of_the_conversation(tokenizer, environment):
    question = QUESTIONS[0]
    prompt = render_rl(question, environment.environment_id)
    messages = [m.model_dump() for m in prompt.prompt]
    sample, contexts = scripted(tokenizer, [SEARCH + IM_END, RAMBLE + IM_END, ANSWER])
    episode = asyncio.run(run_episode(sample, tokenizer, environment.execute, prompt_ids(tokenizer, messages),
                                      max_turns=5, max_response_tokens=4096))
    search, ramble, answer = episode.turns
    assert search.tool_call.name == "search" and not search.tool_error
    assert "Michelle Obama" in search.observation
    assert ramble.parse_error == PARSE_ERROR and ramble.tool_call is None
    assert answer.final_answer == "Chicago" and episode.stop_reason == "answered"

    conversation = messages + [
        {"role": "assistant", "content": SEARCH}, {"role": "user", "content": nanbeige_tool_response(search.observation)},
        {"role": "assistant", "content": RAMBLE}, {"role": "user", "content": nanbeige_tool_response(PARSE_ERROR)},
        {"role": "assistant", "content": ANSWER},
    ]
    ids = episode.prompt_ids + episode.response_ids
    assert tokenizer.decode(ids) == render_text(conversation)
    assert tokenizer.encode(render_text(conversation), add_special_tokens=False) == ids
    # each turn's sampler context is the previous one plus what followed: the prefix property of rollouts
    assert all(later[: len(earlier)] == earlier for earlier, later in zip(contexts, contexts[1:], strict=False))

    sampled = [tokenizer.decode(episode.response_ids[s:e]) for s, e in episode.spans]
    assert sampled == [SEARCH + IM_END, RAMBLE + IM_END, ANSWER]
    assert sum(episode.response_mask) == sum(e - s for s, e in episode.spans)
    assert tokenizer.decode(episode.response_ids[-2:]) == IM_END + "\n"  # closed for the cut-off answer, mask 0
    assert episode.response_mask[-2:] == [0, 0]
    assert sorted(set(episode.turn_ids())) == [-1, 0, 1, 2]


def test_critic_verdicts_become_the_verl_token_rewards(tokenizer, environment):
    question = QUESTIONS[0]
    prompt = render_rl(question, environment.environment_id)
    messages = [m.model_dump() for m in prompt.prompt]
    sample, _ = scripted(tokenizer, [SEARCH + IM_END, RAMBLE + IM_END, ANSWER + IM_END])
    episode = asyncio.run(run_episode(sample, tokenizer, environment.execute, prompt_ids(tokenizer, messages),
                                      max_turns=5, max_response_tokens=4096))
    trajectory = episode_trajectory(episode, messages, prompt, trajectory_id="t", policy="scripted", engine="test",
                                    seed=0, rollout_index=0, environment=environment.environment_id)
    assert trajectory.outcome.correct
    judged = judge_trajectory(trajectory, question, JudgeConfig())
    assert judged.judgements[1].verdict is False  # the unparsed turn fails the critic
    mask, rewards = mask_failed_turns(episode, judged, "mask")
    kept = [j.reward for j in judged.judgements if j.verdict]
    assert rewards == kept and len(rewards) < 3
    start, end = episode.spans[1]
    assert mask[start:end] == [0] * (end - start)
    mask_tensor = torch.tensor([mask])
    token_rewards = place_turn_rewards(mask_tensor, [rewards], [judged.outcome_reward], [len(mask) - 1])
    outcome, turn_rewards, valid, _ = read_turn_rewards(token_rewards, mask_tensor)
    assert outcome.tolist() == [judged.outcome_reward]
    assert turn_rewards[valid].tolist() == pytest.approx(rewards)

    penalty_mask, penalty_rewards = mask_failed_turns(episode, judged, "penalty")
    assert penalty_mask == episode.response_mask and len(penalty_rewards) == 3


def test_a_response_budget_stops_the_episode_and_still_closes_it(tokenizer, environment):
    prompt = render_rl(QUESTIONS[0], environment.environment_id)
    messages = [m.model_dump() for m in prompt.prompt]
    sample, _ = scripted(tokenizer, [SEARCH + IM_END] * 5)
    episode = asyncio.run(run_episode(sample, tokenizer, environment.execute, prompt_ids(tokenizer, messages),
                                      max_turns=5, max_response_tokens=60))
    assert len(episode.response_ids) <= 60 and episode.stop_reason == "max_turns"
    assert episode.response_mask[-1] == 0 and tokenizer.decode(episode.response_ids[-1:]) == "\n"


def test_a_malformed_answer_call_gets_the_error_and_the_episode_goes_on_as_in_the_sft_data(tokenizer, environment):
    """The stage 3 loop answers `answer` with the wrong arguments by an error and goes on; so does RL."""
    prompt = render_rl(QUESTIONS[0], environment.environment_id)
    messages = [m.model_dump() for m in prompt.prompt]
    malformed = "<think>\nIt is Chicago.\n</think>\n\n" + nanbeige_tool_call("answer", {"answer": "Chicago"})
    empty = "<think>\nIt is Chicago.\n</think>\n\n" + nanbeige_tool_call("answer", {"text": ""})
    valid = "<think>\nIt is Chicago.\n</think>\n\n" + nanbeige_tool_call("answer", {"text": "Chicago"})
    sample, _ = scripted(tokenizer, [malformed + IM_END, empty + IM_END, valid + IM_END])
    episode = asyncio.run(run_episode(sample, tokenizer, environment.execute, prompt_ids(tokenizer, messages),
                                      max_turns=5, max_response_tokens=4096))
    first, second, last = episode.turns
    for turn in (first, second):
        assert turn.tool_error and turn.final_answer is None and turn.observation.startswith("Error: invalid arguments")
    assert last.final_answer == "Chicago" and not last.tool_error and episode.stop_reason == "answered"
