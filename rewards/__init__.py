"""Reward layer: hack findings, rubric, rule reward and the combined reward (pure functions)."""
