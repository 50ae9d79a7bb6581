"""Policy losses on per-token tensors: advantage-weighted / filtered cloning (offline) and PPO-clip (online).

All tensors are [B, L-1], aligned with `token_logprobs` (position i scores token i+1). `mask` selects the
tokens that train (assistant tokens of valid turns). Losses average over masked tokens of the batch.
"""

from __future__ import annotations

import torch

from rl.config import OfflineObjective


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    mask = mask.float()
    return (values * mask).sum() / mask.sum().clamp(min=1.0)


def cloning_weights(advantages: torch.Tensor, objective: OfflineObjective, beta: float = 1.0,
                    max_weight: float = 20.0) -> torch.Tensor:
    """Per-token imitation weights, sound for data another policy produced.

    `awr`: exp(A / beta), clipped at `max_weight` (advantage-weighted regression);
    `filtered`: 1 where A > 0, else 0 (filtered behaviour cloning).
    """
    if objective == "awr":
        return torch.exp(advantages / beta).clamp(max=max_weight)
    if objective == "filtered":
        return (advantages > 0).float()
    raise ValueError(f"unknown offline objective {objective!r}; use 'awr' or 'filtered'")


def cloning_loss(logprobs: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, objective: OfflineObjective,
                 beta: float = 1.0, max_weight: float = 20.0) -> torch.Tensor:
    """-mean(w * log p) over masked tokens, weights from the (fixed) advantages."""
    weights = cloning_weights(advantages.detach(), objective, beta, max_weight)
    return -masked_mean(weights * logprobs, mask)


def kl_k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token KL(policy || reference) estimate exp(r - p) - (r - p) - 1: unbiased, never negative."""
    delta = ref_logprobs - logprobs
    return torch.exp(delta) - delta - 1.0


def ppo_clip_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                  clip_eps: float = 0.2, ref_logprobs: torch.Tensor | None = None,
                  kl_coef: float = 0.0) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO clipped surrogate (+ kl_coef * KL to the reference); returns the loss and its statistics."""
    ratio = torch.exp(logprobs - old_logprobs.detach())
    unclipped = ratio * advantages
    clipped = ratio.clamp(1.0 - clip_eps, 1.0 + clip_eps) * advantages
    per_token = -torch.minimum(unclipped, clipped)
    stats = {}
    if mask.sum() > 0:  # statistics of tokens that train; none when every turn is masked
        stats = {"clip_frac": masked_mean(((ratio - 1.0).abs() > clip_eps).float(), mask).item(),
                 "ratio": masked_mean(ratio, mask).item()}
    if ref_logprobs is not None:
        kl = kl_k3(logprobs, ref_logprobs.detach())
        if mask.sum() > 0:
            stats["kl"] = masked_mean(kl, mask).item()
        if kl_coef:
            per_token = per_token + kl_coef * kl
    return masked_mean(per_token, mask), stats
