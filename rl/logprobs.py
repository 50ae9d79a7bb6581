"""Per-token log-probabilities computed in sequence chunks, so a 166K vocabulary never materialises whole.

Full logits for a batch are B x L x V floats (for V = 166,144 and L = 32K tokens that is 21 GB per
sequence in fp32). Here the decoder runs once, then the output head and log-softmax run over `chunk`
positions at a time; under gradients each chunk is recomputed in the backward pass (activation
checkpointing), so peak memory is one chunk's logits.
"""

from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint


def _chunk_logprobs(head: torch.nn.Module, hidden: torch.Tensor, targets: torch.Tensor,
                    temperature: float) -> torch.Tensor:
    logits = head(hidden).float() / temperature
    return torch.gather(logits, -1, targets.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)


def token_logprobs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, chunk: int = 1024,
                   temperature: float = 1.0) -> torch.Tensor:
    """log p(input_ids[:, i+1] | input_ids[:, :i+1]) for each position -> [B, L-1].

    Works for any causal LM exposing `base_model` (the decoder) and `get_output_embeddings()` (the head).
    """
    hidden = model.base_model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state[:, :-1]
    targets = input_ids[:, 1:]
    head = model.get_output_embeddings()
    pieces = []
    for start in range(0, hidden.shape[1], chunk):
        args = (head, hidden[:, start:start + chunk], targets[:, start:start + chunk], temperature)
        if torch.is_grad_enabled() and hidden.requires_grad:
            pieces.append(checkpoint(_chunk_logprobs, *args, use_reentrant=False))
        else:
            pieces.append(_chunk_logprobs(*args))
    return torch.cat(pieces, dim=1)


class PolicyLogprobs(torch.nn.Module):
    """A causal LM whose forward returns per-token log-probs: what distributed wrappers (DDP) should wrap."""

    def __init__(self, model, chunk: int = 1024):
        super().__init__()
        self.model = model
        self.chunk = chunk

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return token_logprobs(self.model, input_ids, attention_mask, self.chunk)
