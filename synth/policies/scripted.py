"""The offline scripted policy: an honest searcher (synth.policies.searcher) wrapped by an error model
(synth.policies.error_injection), the boundary of what may know the gold path drawn between them.

- The searcher reads a `QuestionReading` (the question's words, the relations they chain, the kind of
  answer asked), the turns so far (their observations) and the rollout's style: no gold entity, value or
  answer, no index to peek into.
- The injector may read all of the question (gold path and answer included), the turns, the index's page
  list, and the searcher's waiting call and position; it alone draws from the episode's error stream.

Records say policy="scripted", engine="offline". The searcher does not know the gold path, so it fails
on some questions; the card reports its solve rate by hop count.
"""

from __future__ import annotations

import random

from schemas.questions import Question
from synth.environment import SearchEnvironment
from synth.frameworks import Framework
from synth.policies.error_injection import ERROR_KINDS, ErrorInjector
from synth.policies.searcher import QuestionReading, RolloutStyle, Searcher


class ScriptedPolicy:
    """Offline policy; records say policy="scripted", engine="offline"."""

    name = "scripted"
    engine = "offline"
    model = None

    def __init__(self, env: SearchEnvironment, error_rates: dict[str, float] | None = None, top_k: int = 5):
        rates = self.check_rates(error_rates or {})
        self.env = env
        self.rates = [(kind, rates.get(kind, 0.0)) for kind in ERROR_KINDS]
        self.top_k = top_k

    @staticmethod
    def check_rates(rates: dict[str, float]) -> dict[str, float]:
        """Per-turn error rates: known kinds only, each >= 0, summing to less than 1."""
        unknown = sorted(set(rates) - set(ERROR_KINDS))
        if unknown:
            raise ValueError(f"unknown error kinds {unknown}; known: {', '.join(ERROR_KINDS)}")
        if any(r < 0 for r in rates.values()) or sum(rates.values()) >= 1:
            raise ValueError("error rates must be >= 0 and sum to less than 1")
        return dict(rates)

    def start(self, question: Question, framework: Framework, seed: int, rollout: int) -> ErrorInjector:
        """The searcher gets only the question's reading; the injector gets the question whole."""
        searcher = Searcher(QuestionReading.of(question), RolloutStyle.draw(seed), self.top_k)
        return ErrorInjector(searcher, question, framework, self.env, self.rates, random.Random(seed), self.top_k)
