"""Turn-reward RL from the shards: offline advantage-weighted cloning, then online PPO-clip in the environment.

One readable loop per mode, explicit tensors and masks (trl/nanoGPT style). The same code runs a tiny
random LLaMA on CPU and a real model on GPUs: `accelerate` places the model and, under
`accelerate launch`, each process takes its share of the batches (groups stay whole, so group
normalisation never crosses processes).

A run is resumable by phase: each finished mode saves a checkpoint under `phases/<mode>/`; a rerun loads
the last finished one and continues with the next mode.
"""

from __future__ import annotations

import copy
import json
import logging
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from ground.errors import UserError
from ground.io import atomic_write_text, read_manifest, shard_files
from ground.stage import begin_stage
from ground.storage import StorePath, as_path, working_copy
from rl.advantages import token_advantages, turn_advantages
from rl.chat import IM_END, render_text
from rl.config import RLConfig
from rl.data import (
    Example,
    build_examples,
    make_example,
    ordered_judgements,
    read_prompts,
    read_questions,
    read_trajectories,
    trajectory_messages,
)
from rl.logprobs import PolicyLogprobs
from rl.objectives import cloning_loss, cloning_weights, kl_k3, masked_mean, ppo_clip_loss
from rl.rollout import Execute, Rollout, rollout
from schemas.critic import CRITERIA, JudgedTrajectory
from schemas.dataset import RLPrompt
from schemas.manifest import Manifest
from schemas.trajectory import Trajectory

log = logging.getLogger(__name__)

Judge = Callable[[Trajectory], JudgedTrajectory]
DONE = "done.json"


# ------------------------------------------------------------------------------------------ tensors


@dataclass
class TurnBatch:
    """Per-turn signals of a list of examples, padded to the longest: [B] and [B, T] tensors."""

    outcome: torch.Tensor
    rewards: torch.Tensor
    valid: torch.Tensor
    passed: torch.Tensor
    groups: torch.Tensor


def turn_batch(examples: list[Example]) -> TurnBatch:
    width = max((len(e.turn_rewards) for e in examples), default=0)
    rewards = torch.zeros(len(examples), width)
    valid = torch.zeros(len(examples), width, dtype=torch.bool)
    passed = torch.zeros(len(examples), width, dtype=torch.bool)
    for row, example in enumerate(examples):
        count = len(example.turn_rewards)
        rewards[row, :count] = torch.tensor(example.turn_rewards, dtype=torch.float)
        valid[row, :count] = True
        passed[row, :count] = torch.tensor(example.turn_passed, dtype=torch.bool)
    group_index = {key: i for i, key in enumerate(sorted({e.question_id for e in examples}))}
    return TurnBatch(
        outcome=torch.tensor([e.outcome_reward for e in examples], dtype=torch.float),
        rewards=rewards, valid=valid, passed=passed,
        groups=torch.tensor([group_index[e.question_id] for e in examples], dtype=torch.long),
    )


def example_turn_advantages(examples: list[Example], config: RLConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """Turn advantages [B, T] and the turns that train [B, T], after the failed-turn policy."""
    batch = turn_batch(examples)
    advantages = turn_advantages(
        config.estimator, batch.outcome, batch.rewards, batch.valid, batch.passed, batch.groups,
        failed_turns=config.failed_turns, failed_turn_reward=config.failed_turn_reward,
        turn_coef=config.turn_coef, gamma=config.gamma, scale=config.scale_by_std,
    )
    trains = batch.valid & (batch.passed if config.failed_turns == "mask" else torch.ones_like(batch.passed))
    return advantages, trains


@dataclass
class TokenBatch:
    """Right-padded ids with the per-target tensors aligned to `token_logprobs` ([B, L-1])."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    mask: torch.Tensor
    advantages: torch.Tensor

    def to(self, device) -> TokenBatch:
        return TokenBatch(*(t.to(device) for t in (self.input_ids, self.attention_mask, self.mask, self.advantages)))

    def rows(self, index: list[int]) -> TokenBatch:
        return TokenBatch(self.input_ids[index], self.attention_mask[index], self.mask[index], self.advantages[index])


def token_batch(examples: list[Example], turn_adv: torch.Tensor, turn_trains: torch.Tensor, pad_id: int) -> TokenBatch:
    """Pad examples and spread turn advantages onto tokens; `mask` = assistant tokens of training turns."""
    length = max(len(e.input_ids) for e in examples)
    ids = torch.full((len(examples), length), pad_id, dtype=torch.long)
    attention = torch.zeros(len(examples), length, dtype=torch.long)
    loss_mask = torch.zeros(len(examples), length)
    turn_ids = torch.full((len(examples), length), -1, dtype=torch.long)
    for row, example in enumerate(examples):
        n = len(example.input_ids)
        ids[row, :n] = torch.tensor(example.input_ids)
        attention[row, :n] = 1
        loss_mask[row, :n] = torch.tensor(example.loss_mask, dtype=torch.float)
        turn_ids[row, :n] = torch.tensor(example.turn_ids)
    advantages = token_advantages(turn_adv, turn_ids)
    trains = token_advantages(turn_trains.float(), turn_ids)
    return TokenBatch(ids, attention, (loss_mask * trains)[:, 1:], advantages[:, 1:])


def _mean(values) -> float:
    values = list(values)
    return sum(values) / max(len(values), 1)


def turn_stats(examples: list[Example]) -> dict[str, float]:
    """Rewards and pass rates of a batch: overall and per critic criterion."""
    stats = {
        "outcome_reward": _mean(e.outcome_reward for e in examples),
        "turn_reward": _mean(r for e in examples for r in e.turn_rewards),
        "turn_pass_rate": _mean(p for e in examples for p in e.turn_passed),
        "turns_per_episode": _mean(len(e.turn_passed) for e in examples),
    }
    for criterion in CRITERIA:
        stats[f"pass_rate:{criterion}"] = _mean(p for e in examples for p in e.criteria_passed.get(criterion, []))
    return stats


# ------------------------------------------------------------------------------------------ logging


class MetricsLog:
    """One JSON line per step (rewritten from scratch when a phase restarts) plus a console line."""

    def __init__(self, path: Path, is_main: bool):
        self.path = path
        self.is_main = is_main
        if is_main:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")

    def write(self, record: dict) -> None:
        if not self.is_main:
            return
        with self.path.open("a") as handle:
            handle.write(json.dumps(record, sort_keys=True) + "\n")
        shown = " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in record.items())
        print(shown, flush=True)


# ------------------------------------------------------------------------------------------ loops


def _optimizer(policy: torch.nn.Module, config: RLConfig) -> torch.optim.Optimizer:
    return torch.optim.AdamW(policy.parameters(), lr=config.lr, weight_decay=config.weight_decay)


def _step(accelerator, policy, optimizer, loss: torch.Tensor, config: RLConfig) -> float:
    accelerator.backward(loss)
    grad_norm = accelerator.clip_grad_norm_(policy.parameters(), config.grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return float(grad_norm)


def train_offline(accelerator, policy, reference, examples: list[Example], config: RLConfig, pad_id: int,
                  metrics: MetricsLog) -> dict[str, int]:
    """Advantage-weighted (or filtered) cloning of the synthesized trajectories, advantages over all groups."""
    turn_adv, turn_trains = example_turn_advantages(examples, config)
    optimizer = accelerator.prepare(_optimizer(policy, config))
    order = list(range(len(examples)))
    random.Random(config.seed).shuffle(order)
    mine = order[accelerator.process_index::accelerator.num_processes]
    if not mine:
        raise UserError("no training examples for this process: more processes than trajectories")
    policy.train()
    for step in range(config.offline_steps):
        index = [mine[(step * config.batch_size + i) % len(mine)] for i in range(config.batch_size)]
        batch = token_batch([examples[i] for i in index], turn_adv[index], turn_trains[index], pad_id)
        batch = batch.to(accelerator.device)
        logprobs = policy(batch.input_ids, batch.attention_mask)
        loss = cloning_loss(logprobs, batch.advantages, batch.mask, config.offline_objective, config.awr_beta,
                            config.awr_max_weight)
        record = {"mode": "offline", "step": step + 1}
        if reference is not None:
            with torch.no_grad():
                ref_logprobs = reference(batch.input_ids, batch.attention_mask)
            kl = masked_mean(kl_k3(logprobs, ref_logprobs), batch.mask)
            loss = loss + config.kl_coef * kl
            record["kl"] = kl.item()
        record["grad_norm"] = _step(accelerator, policy, optimizer, loss, config)
        weights = cloning_weights(batch.advantages, config.offline_objective, config.awr_beta, config.awr_max_weight)
        record.update(loss=loss.item(), trained_tokens=int(batch.mask.sum()),
                      mean_weight=masked_mean(weights, batch.mask).item(),
                      **turn_stats([examples[i] for i in index]))
        metrics.write(record)
    return {"offline_steps": config.offline_steps}


def rollout_example(judged: JudgedTrajectory, episode: Rollout) -> Example | None:
    """A judged rollout as a training example (None when it has no judged turn to learn from)."""
    judgements = ordered_judgements(judged)
    if not judgements:
        return None
    return make_example(judged, judgements, episode.input_ids, episode.loss_mask, episode.turn_ids)


def ppo_update(accelerator, policy, optimizer, reference, examples: list[Example], config: RLConfig,
               pad_id: int) -> dict[str, float]:
    """PPO-clip epochs over one batch of scored episodes, against the log-probs of the policy that sampled them."""
    turn_adv, turn_trains = example_turn_advantages(examples, config)
    batch = token_batch(examples, turn_adv, turn_trains, pad_id).to(accelerator.device)
    policy.eval()
    with torch.no_grad():
        old_logprobs = policy(batch.input_ids, batch.attention_mask)
        ref_logprobs = reference(batch.input_ids, batch.attention_mask) if reference is not None else None
    policy.train()
    losses, stats = [], Counter()
    for _ in range(config.ppo_epochs):
        for start in range(0, len(examples), config.batch_size):
            rows = list(range(start, min(start + config.batch_size, len(examples))))
            mini = batch.rows(rows)
            logprobs = policy(mini.input_ids, mini.attention_mask)
            loss, loss_stats = ppo_clip_loss(
                logprobs, old_logprobs[rows], mini.advantages, mini.mask, config.clip_eps,
                ref_logprobs[rows] if ref_logprobs is not None else None, config.kl_coef,
            )
            _step(accelerator, policy, optimizer, loss, config)
            losses.append(loss.item())
            stats.update(loss_stats)
    updates = max(len(losses), 1)
    return {"loss": sum(losses) / updates, **{k: v / updates for k, v in stats.items()},
            "trained_tokens": int(batch.mask.sum())}


def train_online(accelerator, policy, reference, tokenizer, prompts: list[RLPrompt], execute: Execute, judge: Judge,
                 config: RLConfig, metrics: MetricsLog, environment: str = "") -> dict[str, int]:
    """Roll out groups in the environment, judge every turn, and take PPO-clip steps on turn advantages."""
    optimizer = accelerator.prepare(_optimizer(policy, config))
    generator = accelerator.unwrap_model(policy).model
    chooser = random.Random(config.seed * 1_000_003 + accelerator.process_index)
    counts: Counter = Counter()
    for step in range(config.online_steps):
        chosen = chooser.sample(prompts, min(config.prompts_per_step, len(prompts)))
        generator.eval()
        examples: list[Example] = []
        for prompt in chosen:
            for g in range(config.group_size):
                with accelerator.autocast():
                    episode = rollout(
                        generator, tokenizer, execute, prompt, g + step * config.group_size,
                        max_turns=config.max_turns, max_new_tokens=config.max_new_tokens, max_len=config.max_len,
                        temperature=config.temperature, seed=config.seed, environment=environment,
                    )
                example = rollout_example(judge(episode.trajectory), episode)
                counts["rollouts"] += 1
                counts["rollouts_answered"] += episode.trajectory.stop_reason == "answered"
                if example is None:
                    counts["skipped:no_judged_turns"] += 1
                else:
                    examples.append(example)
        record = {"mode": "online", "step": step + 1, "episodes": len(examples)}
        if not examples:
            metrics.write(record)
            continue
        record.update(ppo_update(accelerator, policy, optimizer, reference, examples, config, tokenizer.pad_token_id),
                      accuracy=sum(e.outcome_reward > 0 for e in examples) / len(examples), **turn_stats(examples))
        metrics.write(record)
    counts["online_steps"] = config.online_steps
    return dict(counts)


# ------------------------------------------------------------------------------------------ the run


def load_tokenizer(config: RLConfig, corpus: list[str], saved: Path):
    """The run's tokenizer: saved by an earlier attempt, the pretrained model's, or trained on the corpus."""
    from transformers import AutoTokenizer

    from rl.tokenizer import train_tokenizer

    if (saved / "tokenizer_config.json").is_file():
        return AutoTokenizer.from_pretrained(saved)
    try:
        tokenizer = AutoTokenizer.from_pretrained(config.model) if config.model else \
            train_tokenizer(corpus, config.tiny.vocab_size)
    except OSError as error:
        raise UserError(f"cannot load the tokenizer of {config.model}: {error}") from error
    if tokenizer.pad_token_id is None:  # padding is masked out; any id will do
        tokenizer.pad_token = tokenizer.eos_token
    if tokenizer.convert_tokens_to_ids(IM_END) in (None, tokenizer.unk_token_id):
        raise UserError(f"the tokenizer of {config.model} has no {IM_END} token: not a ChatML (Nanbeige/Qwen) model")
    tokenizer.save_pretrained(saved)
    return tokenizer


def load_model(config: RLConfig, tokenizer, checkpoint: Path | None = None):
    """A checkpoint, the pretrained model, or a tiny LLaMA initialised from the seed.

    The trained policy stays in fp32 (master weights; `bf16` autocasts the compute through accelerate);
    the frozen reference may be loaded in bf16.
    """
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

    source = checkpoint or (Path(config.model) if config.model else None)
    if source is not None:
        model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
    else:
        torch.manual_seed(config.seed)
        tiny = config.tiny
        model = LlamaForCausalLM(LlamaConfig(
            vocab_size=len(tokenizer), hidden_size=tiny.hidden_size, intermediate_size=tiny.intermediate_size,
            num_hidden_layers=tiny.num_hidden_layers, num_attention_heads=tiny.num_attention_heads,
            num_key_value_heads=tiny.num_key_value_heads, max_position_embeddings=tiny.max_position_embeddings,
            bos_token_id=None, eos_token_id=tokenizer.convert_tokens_to_ids(IM_END),
            pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False,
        ))
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    if config.gradient_checkpointing:
        model.activation_checkpointing_enable()
    return model


def save_checkpoint(accelerator, policy: PolicyLogprobs, tokenizer, folder: Path) -> None:
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        model = accelerator.unwrap_model(policy).model
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)


def default_index_dir(shards: Path | StorePath) -> Path | StorePath:
    return shards.resolve().parent / "index"


def environment_for(config: RLConfig, shards: Path | StorePath):
    """The stage 3 search environment the online mode rolls out in."""
    from synth.environment import SearchEnvironment

    index_dir = as_path(config.index_dir) if config.index_dir else default_index_dir(shards)
    if read_manifest(index_dir) is None:
        raise UserError(f"online RL needs the search index: no finished index in {index_dir} (pass --index DIR)")
    return SearchEnvironment.load(index_dir)


def critic_judge(shards: Path | StorePath, config: RLConfig) -> Judge:
    """The stage 4 critic's offline engine, judging rollouts against the dataset's questions."""
    from critic.scoring import judge_trajectory
    from schemas.config import JudgeConfig
    questions = {q.question_id: q for q in read_questions(shards)}
    judge_config = JudgeConfig(failed_turns=config.failed_turns, failed_turn_reward=config.failed_turn_reward)
    return lambda trajectory: judge_trajectory(trajectory, questions.get(trajectory.question_id), judge_config)


def run_rl(shards: str | Path, out_dir: str | Path, config: RLConfig, judge: Judge | None = None,
           environment=None) -> Manifest:
    """Train from the dataset folder `shards` into `out_dir` (checkpoint/, metrics-<mode>.jsonl, manifest).

    Either may be a URL (`s3://`, `gs://`). Torch writes its checkpoints to local files, so on object storage
    the run works in a local copy of `out_dir` (downloaded first: a resumed run finds its finished phases)
    and uploads each piece as it is done: the tokenizer, each finished phase (its weights, then its marker),
    the final checkpoint; the manifest comes last, as for every stage."""
    from accelerate import Accelerator

    shards, out_dir = as_path(shards), as_path(out_dir)
    judged = read_trajectories(shards, config.split, config.max_trajectories)
    prompts = read_prompts(shards, config.split, config.pass_band) if "online" in config.modes else []
    prompt_config = "rl" if config.pass_band is None else "questions"  # where the prompts come from
    shard_inputs = shard_files(shards / "data" / "trajectories") + shard_files(shards / "data" / prompt_config)
    run = begin_stage("rl", out_dir, config, input_files=shard_inputs)
    if run.done:
        return run.finished
    with working_copy(out_dir) as (work, upload):
        accelerator = Accelerator(mixed_precision="bf16" if config.bf16 else "no")
        if not accelerator.is_main_process:
            upload = lambda relative: None  # noqa: E731 - one process uploads
        counts, outputs = _train(accelerator, shards, work, upload, judged, prompts, config, judge, environment)
    return run.finish(dict(counts), outputs, seed=config.seed)


def _train(accelerator, shards: Path | StorePath, work: Path, upload: Callable[[str], None],
           judged: list[JudgedTrajectory], prompts: list[RLPrompt], config: RLConfig, judge: Judge | None,
           environment) -> tuple[Counter, dict[str, list[str]]]:
    """The phases of `run_rl`, in the local folder `work`; `upload(relative)` saves a finished piece."""
    finished = [m for m in config.modes if (work / "phases" / m / DONE).is_file()]
    corpus = [render_text(trajectory_messages(j)) for j in judged] + \
        [render_text([m.model_dump() for m in p.prompt]) for p in prompts]
    tokenizer = load_tokenizer(config, corpus, work / "tokenizer")
    upload("tokenizer")
    counts: Counter = Counter(trajectories_in=len(judged), prompts_in=len(prompts))
    examples, example_counts = build_examples(judged, tokenizer, config.max_len, config.prefix_check_samples)
    counts.update(example_counts)
    if not examples and "offline" in config.modes:
        raise UserError(f"no usable trajectories in {shards}: {dict(example_counts)}")
    if not prompts and "online" in config.modes:
        raise UserError(f"no rl prompts in {shards} to roll out")
    initial = load_model(config, tokenizer)
    reference = None
    if config.kl_coef > 0:  # the KL anchor is always the initial policy, also after a resume
        frozen = copy.deepcopy(initial).to(torch.bfloat16 if config.bf16 else torch.float32).eval()
        reference = PolicyLogprobs(frozen, config.logprob_chunk).to(accelerator.device)
        reference.requires_grad_(False)
    model = load_model(config, tokenizer, work / "phases" / finished[-1]) if finished else initial
    policy = accelerator.prepare(PolicyLogprobs(model, config.logprob_chunk))
    outputs: dict[str, list[str]] = {"metrics": []}
    for phase_index, mode in enumerate(config.modes):
        phase = work / "phases" / mode
        metrics_path = work / f"metrics-{mode}.jsonl"
        outputs["metrics"].append(metrics_path.name)
        if mode in finished:
            counts.update(json.loads((phase / DONE).read_text())["counts"])
            continue
        torch.manual_seed(config.seed + phase_index)  # a resumed phase samples what an uninterrupted one did
        metrics = MetricsLog(metrics_path, accelerator.is_main_process)
        if mode == "offline":
            phase_counts = train_offline(accelerator, policy, reference, examples, config, tokenizer.pad_token_id,
                                         metrics)
        else:
            env = environment or environment_for(config, shards)
            stale = sum(p.environment != env.environment_id for p in prompts)
            if stale:
                log.warning("%d of %d prompts name another search index than %s; rolling out there anyway",
                            stale, len(prompts), env.environment_id)
            phase_counts = train_online(accelerator, policy, reference, tokenizer, prompts, env.execute,
                                        judge or critic_judge(shards, config), config, metrics, env.environment_id)
            phase_counts["prompts_other_index"] = stale
        counts.update(phase_counts)
        save_checkpoint(accelerator, policy, tokenizer, phase)
        if accelerator.is_main_process:
            upload(metrics_path.name)
            upload(f"phases/{mode}")  # the weights before the marker that says the phase is finished
            atomic_write_text(phase / DONE, json.dumps({"mode": mode, "counts": phase_counts}) + "\n")
            upload(f"phases/{mode}/{DONE}")
    save_checkpoint(accelerator, policy, tokenizer, work / "checkpoint")
    upload("checkpoint")
    outputs["checkpoint"] = ["checkpoint"]
    return counts, outputs
