"""Answer matching used by every stage that grades an answer: normalised exact match, token F1, LLM judge."""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

from schemas.trajectory import Outcome

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans({c: " " for c in string.punctuation + "\u2013\u2014\u2018\u2019\u201c\u201d"})
_BOXED = re.compile(r"\\boxed\{(.*)\}", re.DOTALL)
_THOUSANDS = re.compile(r"(?<=\d)[,\u00a0\u202f](?=\d{3}(?!\d))")
F1_THRESHOLD = 0.8


def normalize_answer(text: str) -> str:
    """Lower case, strip accents, punctuation, articles, thousands separators and extra spaces (SQuAD-style)."""
    boxed = _BOXED.search(text)
    if boxed:
        text = boxed.group(1)
    text = _THOUSANDS.sub("", text)
    if not text.isascii():  # ASCII has no accents to strip, and NFKD leaves it as it is
        text = unicodedata.normalize("NFKD", text)
        text = "".join(c for c in text if not unicodedata.combining(c))
    text = text.lower()
    text = text.translate(_PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


@lru_cache(maxsize=4096)
def normalized_text(text: str) -> str:
    """`normalize_answer` of a text that recurs, such as an observation every rollout of a question reads:
    each distinct text is normalised once."""
    return normalize_answer(text)


def token_f1(prediction: str, gold: str) -> float:
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    common = Counter(pred_tokens) & Counter(gold_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred_tokens)
    recall = overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str, golds: Iterable[str]) -> bool:
    normalized = normalize_answer(prediction)
    return bool(normalized) and any(normalized == normalize_answer(g) for g in golds)


def best_f1(prediction: str, golds: Iterable[str]) -> float:
    return max((token_f1(prediction, g) for g in golds), default=0.0)


def match_answer(prediction: str | None, answer: str, aliases: Iterable[str] = ()) -> Outcome:
    """Grade a prediction offline: correct on exact match with the answer or an alias, or F1 >= 0.8."""
    golds = [answer, *aliases]
    if not prediction:
        return Outcome(exact_match=False, f1=0.0, correct=False, judge="exact_match")
    em = exact_match(prediction, golds)
    f1 = best_f1(prediction, golds)
    return Outcome(exact_match=em, f1=f1, correct=em or f1 >= F1_THRESHOLD, judge="exact_match" if em else "f1")


