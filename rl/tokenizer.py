"""A byte-level BPE tokenizer trained locally on the corpus, with the chat template's tokens: no download.

Used by the CPU path (a tiny random LLaMA needs a tokenizer, and nothing may be fetched). Byte-level BPE
covers every string, so observations with unseen characters still encode.
"""

from __future__ import annotations

from collections.abc import Iterable

from rl.chat import CHAT_TEMPLATE, IM_END, MARKUP_TOKENS, PAD, SPECIAL_TOKENS


def train_tokenizer(texts: Iterable[str], vocab_size: int = 1024):
    """Train byte-level BPE on `texts`; returns a `PreTrainedTokenizerFast` carrying the chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(texts, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token=IM_END, pad_token=PAD)
    tokenizer.add_tokens(list(MARKUP_TOKENS))
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer
