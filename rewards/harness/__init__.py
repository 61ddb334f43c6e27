"""Sandboxed evaluation of one candidate against one task.

Imports only the standard library, torch and ninja: GPU nodes may have nothing else.
Nothing here imports from the rest of the project.
"""

from .config import HarnessConfig
from .result import HARNESS_VERSION, STATUSES, EvalResult


def __getattr__(name):  # lazy: workers import submodules without the evaluator machinery
    if name in ("evaluate", "Evaluator"):
        from . import evaluator

        return getattr(evaluator, name)
    raise AttributeError(name)


__all__ = ["EvalResult", "Evaluator", "HARNESS_VERSION", "HarnessConfig", "STATUSES", "evaluate"]
