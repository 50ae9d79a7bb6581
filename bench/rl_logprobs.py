"""RL log-prob benchmark: chunked per-token log-probs against full logits, at the real 166,144-token vocabulary.

Each variant runs a forward and backward pass of a one-layer LLaMA (hidden 64, vocabulary 166,144) over
one sequence of 1,024 tokens (256 with --quick) in a fresh child process, which reports its peak resident
memory above its own start and its CPU seconds. Baseline, in the same run: `log_softmax` over the
model's full logits, the textbook way. The memory ratio is the point (the logits dominate); the time
ratio shows the price of recomputing each chunk in the backward pass.
"""

from __future__ import annotations

import resource
import time

from bench import in_fresh_process

VOCAB = 166_144
CHUNK = 128


def _rss_kib() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * resource.getpagesize() // 1024


def _measure(variant: str, length: int, queue) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from rl.logprobs import token_logprobs

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=False))
    ids = torch.randint(0, VOCAB, (1, length))
    attention = torch.ones_like(ids)
    start_kib = _rss_kib()
    started = time.process_time()
    if variant == "full":
        logits = model(input_ids=ids, attention_mask=attention).logits[:, :-1].float()
        logprobs = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    else:
        logprobs = token_logprobs(model, ids, attention, chunk=CHUNK)
    logprobs.sum().backward()
    seconds = time.process_time() - started
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    queue.put({"peak_mb": (peak_kib - start_kib) / 1024, "seconds": seconds})


def run(quick: bool) -> dict[str, float]:
    length = 256 if quick else 1024
    full = in_fresh_process(_measure, "full", length)
    chunked = in_fresh_process(_measure, "chunked", length)
    results = {
        "tokens": float(length),
        "full_peak_mb": full["peak_mb"],
        "chunked_peak_mb": chunked["peak_mb"],
        "memory_ratio_chunked_vs_full": chunked["peak_mb"] / full["peak_mb"],
        "full_cpu_s": full["seconds"],
        "chunked_cpu_s": chunked["seconds"],
        "time_ratio_chunked_vs_full": chunked["seconds"] / full["seconds"],
    }
    for name, value in results.items():
        print(f"   {name}: {value:.3f}")
    return results
