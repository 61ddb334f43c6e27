"""Errors a user can cause. The CLI prints their message as one sentence and exits non-zero."""


class UserError(Exception):
    """Bad input from the user (task file, override, missing GPU, unreachable endpoint)."""
