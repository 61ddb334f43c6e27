"""Chat-message rendering of skill prompts from templates (template text in, messages out)."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def template_version(templates: dict[str, str]) -> str:
    """A short hash of the template texts: samples rendered from other templates differ."""
    text = json.dumps(templates, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def render_messages(templates: dict[str, str], skill: int, fields: dict[str, Any]) -> list[dict]:
    """``[{"role": "system", ...}, {"role": "user", ...}]`` for a Skill 1 or Skill 2 prompt.

    >>> t = {"system": "sys", "skill1": "do {subtask}", "skill2": ""}
    >>> render_messages(t, 1, {"subtask": "fuse"})[1]
    {'role': 'user', 'content': 'do fuse'}
    """
    body = templates[f"skill{skill}"]
    values = {k: ("" if v is None else v) for k, v in fields.items()}
    return [{"role": "system", "content": templates["system"].strip()},
            {"role": "user", "content": body.format_map(_Blank(values)).strip()}]


class _Blank(dict):
    def __missing__(self, key: str) -> str:
        return ""


def feedback_text(feedback_json: str | None) -> str:
    """The Verifier's feedback as prompt text (its ``text``/``summary`` field, else the JSON)."""
    if not feedback_json:
        return "(no feedback recorded)"
    try:
        fb = json.loads(feedback_json)
    except (TypeError, ValueError):
        return str(feedback_json)
    if isinstance(fb, dict):
        for k in ("text", "summary", "message", "feedback"):
            if isinstance(fb.get(k), str) and fb[k].strip():
                return fb[k].strip()
        return json.dumps(fb, indent=1, sort_keys=True)
    return str(fb)


def subtask_text(subtask_json: str | None) -> str:
    if not subtask_json:
        return "Implement the whole model."
    try:
        st = json.loads(subtask_json)
    except (TypeError, ValueError):
        return str(subtask_json)
    if isinstance(st, dict):
        return "\n".join(f"- {k}: {v}" for k, v in st.items())
    return str(st)
