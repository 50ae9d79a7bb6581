"""Training: chunked log-probs, turn-level updates move the right turns, and the CPU run end to end."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from accelerate import Accelerator  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from cli.main import main  # noqa: E402
from ground.io import read_manifest  # noqa: E402
from rl.chat import render_text  # noqa: E402
from rl.config import RLConfig  # noqa: E402
from rl.data import build_examples, trajectory_messages  # noqa: E402
from rl.logprobs import PolicyLogprobs, token_logprobs  # noqa: E402
from rl.train import (  # noqa: E402  # noqa: E402
    MetricsLog,
    _optimizer,
    example_turn_advantages,
    load_model,
    ppo_update,
    run_rl,
    token_batch,
    train_offline,
)
from tests.rl_fixtures import TINY, fast_config, fixture_trajectories, make_dataset  # noqa: E402


@pytest.fixture(scope="module")
def tokenizer():
    from rl.tokenizer import train_tokenizer

    return train_tokenizer([render_text(trajectory_messages(j)) for j in fixture_trajectories()], TINY.vocab_size)


@pytest.fixture(scope="module")
def examples(tokenizer):
    examples, _ = build_examples(fixture_trajectories(), tokenizer, max_len=1024)
    return examples


def test_chunked_logprobs_equal_the_full_log_softmax_with_gradients(tokenizer, examples):
    model = load_model(RLConfig(tiny=TINY, seed=1), tokenizer)
    ids = torch.tensor([examples[0].input_ids[:50], examples[1].input_ids[:50]])
    attention = torch.ones_like(ids)
    full = torch.log_softmax(model(input_ids=ids, attention_mask=attention).logits[:, :-1].float(), -1)
    expected = full.gather(-1, ids[:, 1:, None]).squeeze(-1)
    chunked = token_logprobs(model, ids, attention, chunk=7)
    assert torch.allclose(chunked, expected, atol=1e-5)
    expected.sum().backward()
    full_grad = model.lm_head.weight.grad.clone()
    model.zero_grad()
    token_logprobs(model, ids, attention, chunk=7).sum().backward()
    assert torch.allclose(model.lm_head.weight.grad, full_grad, atol=1e-5)


def test_gradient_checkpointing_gives_the_same_gradients(tokenizer, examples):
    ids = torch.tensor([examples[0].input_ids[:40]])
    grads = []
    for checkpointing in (False, True):
        model = load_model(RLConfig(tiny=TINY, seed=2, gradient_checkpointing=checkpointing), tokenizer).train()
        token_logprobs(model, ids, torch.ones_like(ids), chunk=16).sum().backward()
        grads.append({name: p.grad for name, p in model.named_parameters()})
    assert all(torch.allclose(grads[0][name], grads[1][name], atol=1e-5) for name in grads[0])


def turn_logprob_sums(policy, examples, tokenizer) -> dict[tuple[str, int], float]:
    """Summed log-prob of each (trajectory, turn)'s trained tokens under the policy."""
    turn_adv, trains = example_turn_advantages(examples, RLConfig())
    batch = token_batch(examples, turn_adv, torch.ones_like(trains), tokenizer.pad_token_id)
    with torch.no_grad():
        logprobs = policy(batch.input_ids, batch.attention_mask)
    sums = {}
    for row, example in enumerate(examples):
        turn_ids = torch.tensor(example.turn_ids[1:])
        for turn in range(len(example.turn_rewards)):
            in_turn = (turn_ids == turn) & batch.mask[row, : len(turn_ids)].bool()
            sums[(example.trajectory_id, turn)] = logprobs[row, : len(turn_ids)][in_turn].sum().item()
    return sums


@pytest.mark.parametrize("mode", ["ppo", "offline"])
def test_turn_level_updates_raise_high_reward_turns_relative_to_low_ones(tokenizer, examples, mode, tmp_path):
    config = RLConfig(tiny=TINY, seed=3, lr=3e-3, batch_size=4, estimator="mt_grpo", failed_turns="penalty",
                      kl_coef=0.0, offline_steps=4, offline_objective="awr", ppo_epochs=3)
    torch.manual_seed(0)
    accelerator = Accelerator(cpu=True)
    policy = accelerator.prepare(PolicyLogprobs(load_model(config, tokenizer), chunk=64))
    turn_adv, trains = example_turn_advantages(examples, config)
    high = {(e.trajectory_id, t) for row, e in enumerate(examples) for t in range(len(e.turn_rewards))
            if turn_adv[row, t] > 0.5}
    low = {(e.trajectory_id, t) for row, e in enumerate(examples) for t in range(len(e.turn_rewards))
           if turn_adv[row, t] < -0.5}
    assert high and low
    before = turn_logprob_sums(policy, examples, tokenizer)
    if mode == "ppo":
        optimizer = accelerator.prepare(_optimizer(policy, config))
        stats = ppo_update(accelerator, policy, optimizer, None, examples, config, tokenizer.pad_token_id)
        assert stats["trained_tokens"] > 0
    else:
        train_offline(accelerator, policy, None, examples, config, tokenizer.pad_token_id,
                      MetricsLog(tmp_path / "m.jsonl", True))
    after = turn_logprob_sums(policy, examples, tokenizer)
    rise = {key: after[key] - before[key] for key in before}
    mean_high = sum(rise[k] for k in high) / len(high)
    mean_low = sum(rise[k] for k in low) / len(low)
    assert mean_high > mean_low + 0.5, (mean_high, mean_low)
    if mode == "ppo":
        assert mean_low < 0 < mean_high


@pytest.fixture(scope="module")
def fixture_run(tmp_path_factory):
    """Shards, a real search index over the stage 3 fixture snapshot, and a finished CPU run."""
    from synth.environment import build_index
    from tests.trajectory_fixtures import make_graph

    root = tmp_path_factory.mktemp("rl")
    index = build_index(make_graph(root / "graph"), root / "index")
    shards = make_dataset(root / "dataset", environment=index.key)
    manifest = run_rl(shards, root / "rl", fast_config(index_dir=str(root / "index")))
    return root, manifest


def test_cpu_run_on_shards_trains_both_modes_and_writes_a_checkpoint_that_reloads(fixture_run):
    root, manifest = fixture_run
    out = root / "rl"
    assert manifest.counts["kept"] == 4 and manifest.counts["trajectories_in"] == 4
    assert manifest.counts["rollouts"] == 4 and manifest.counts["online_steps"] == 1
    offline = [json.loads(line) for line in (out / "metrics-offline.jsonl").read_text().splitlines()]
    online = [json.loads(line) for line in (out / "metrics-online.jsonl").read_text().splitlines()]
    assert [r["step"] for r in offline] == [1, 2] and len(online) == 1
    for key in ("loss", "kl", "outcome_reward", "turn_pass_rate", "pass_rate:information_gain"):
        assert key in offline[0]
    for key in ("loss", "kl", "ratio", "outcome_reward", "turn_reward", "turn_pass_rate", "accuracy"):
        assert key in online[0]
    assert online[0]["trained_tokens"] > 0
    model = AutoModelForCausalLM.from_pretrained(out / "checkpoint")
    tokenizer = AutoTokenizer.from_pretrained(out / "checkpoint")
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "Who?"}], add_generation_prompt=True,
                                        return_tensors="pt", return_dict=True)["input_ids"]
    generated = model.generate(input_ids=ids, max_new_tokens=3, do_sample=False)
    assert generated.shape[1] > ids.shape[1]
    assert model.config.vocab_size == len(tokenizer)


def test_rerun_skips_and_a_run_killed_after_a_phase_resumes_to_the_same_weights(fixture_run):
    from safetensors.torch import load_file

    root, manifest = fixture_run
    out = root / "rl"
    config = fast_config(index_dir=str(root / "index"))
    assert run_rl(root / "dataset", out, config).finished_at == manifest.finished_at
    finished = load_file(out / "checkpoint" / "model.safetensors")
    offline_log = (out / "metrics-offline.jsonl").read_text()
    # simulate a kill during the online phase: no manifest, no online phase, the pending key still there
    (out / "manifest.json").unlink()
    (out / ".pending-key").write_text(manifest.key)
    for path in sorted((out / "phases" / "online").iterdir()):
        path.unlink()
    (out / "checkpoint" / "model.safetensors").unlink()
    resumed = run_rl(root / "dataset", out, config)
    assert resumed.counts == manifest.counts
    assert (out / "metrics-offline.jsonl").read_text() == offline_log
    weights = load_file(out / "checkpoint" / "model.safetensors")
    assert all(torch.equal(weights[name], finished[name]) for name in finished)


@pytest.mark.timeout(600)  # longer offline-policy runs (exploring rollouts) make longer sequences; ~280 s on 2 busy cores
def test_make_rl_on_make_dataset_shards_writes_a_checkpoint_that_reloads(small_dataset_run, tmp_path):
    """What `make rl` runs (the tiny-cpu preset, both modes) on the shards `hopsmith dataset` wrote."""
    out = tmp_path / "rl"
    code = main(["rl", "train", "--shards", str(small_dataset_run / "dataset"), "--out", str(out),
                 "--preset", "tiny-cpu"])
    assert code == 0
    manifest = read_manifest(out)
    assert manifest.counts["kept"] > 0
    assert {json.loads(line)["mode"] for line in (out / "metrics-online.jsonl").read_text().splitlines()} == {"online"}
    assert AutoModelForCausalLM.from_pretrained(out / "checkpoint") is not None
    assert AutoTokenizer.from_pretrained(out / "checkpoint") is not None
