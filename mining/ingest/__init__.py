"""Import existing generations (KernelBench runs, ``<task>/<file>.py`` trees, JSONL) for scoring."""
