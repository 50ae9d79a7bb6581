"""Benchmarks: each module measures hopsmith against a baseline run in the same process, as a ratio."""
