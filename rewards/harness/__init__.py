"""Sandboxed evaluation of one candidate against one task.

Imports only the standard library, torch and ninja: GPU nodes may have nothing else.
Nothing here imports from the rest of the project.
"""

from .result import HARNESS_VERSION, STATUSES, EvalResult

__all__ = ["EvalResult", "HARNESS_VERSION", "STATUSES"]
