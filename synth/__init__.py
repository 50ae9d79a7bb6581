"""Synthesis: questions, the search environment, agent frameworks and trajectories."""
