"""Policies that drive an agent framework: an LLM through the shared client, or the offline scripted searcher."""

from __future__ import annotations

from synth.policies.base import Agent, Policy, PolicyOutput, episode_seed, run_episode, trajectory_id
from synth.policies.error_injection import ERROR_KINDS
from synth.policies.llm import LLMPolicy
from synth.policies.scripted import ScriptedPolicy

__all__ = [
    "ERROR_KINDS",
    "Agent",
    "LLMPolicy",
    "Policy",
    "PolicyOutput",
    "ScriptedPolicy",
    "episode_seed",
    "run_episode",
    "trajectory_id",
]
