"""LLM backends, prompt templates, the Planner, Coder and Verifier, and their state machine."""
