"""Prompt templates live as files in ``agents/prompts/``; ``${name}`` placeholders."""

from __future__ import annotations

import functools
from pathlib import Path
from string import Template

PROMPTS = Path(__file__).resolve().parent / "prompts"


@functools.cache
def _template(name: str) -> Template:
    return Template((PROMPTS / f"{name}.md").read_text(encoding="utf-8").strip())


def render(name: str, **values) -> str:
    """Fill template ``name``; a missing placeholder is an error (never a silent ``${x}``)."""
    return _template(name).substitute({k: str(v) for k, v in values.items()})
