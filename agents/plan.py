"""The Planner's structured plan: JSON in, validated dataclasses out."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

LIST_KEYS = ("fusion_boundaries", "layout_contracts", "host_concerns")


class PlanError(ValueError):
    """A plan that does not validate; the message says what is wrong."""


@dataclass
class Subtask:
    title: str
    ops: list[str]
    description: str = ""

    def brief(self) -> str:
        ops = ", ".join(self.ops) if self.ops else "-"
        return f"{self.title} (ops: {ops}). {self.description}".strip()


@dataclass
class Plan:
    subtasks: list[Subtask]
    fusion_boundaries: list[str] = field(default_factory=list)
    layout_contracts: list[str] = field(default_factory=list)
    host_concerns: list[str] = field(default_factory=list)
    fallback: bool = False  # True when the Planner's answer was unusable

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def render(self) -> str:
        lines = [f"{i + 1}. {s.brief()}" for i, s in enumerate(self.subtasks)]
        for key in LIST_KEYS:
            vals = getattr(self, key)
            if vals:
                lines.append(f"{key.replace('_', ' ')}: " + "; ".join(vals))
        return "\n".join(lines)


def _str_list(v: Any, key: str) -> list[str]:
    if v is None:
        return []
    if isinstance(v, str):
        return [v]
    if not isinstance(v, list):
        raise PlanError(f"'{key}' must be a list of strings")
    return [x if isinstance(x, str) else json.dumps(x) for x in v]


def parse_plan(text: str) -> Plan:
    """Validate a JSON plan; raises PlanError with one sentence on the first problem."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise PlanError(f"it is not valid JSON ({e.msg} at line {e.lineno})") from e
    if not isinstance(data, dict):
        raise PlanError("it is not a JSON object")
    subs = data.get("subtasks")
    if not isinstance(subs, list) or not subs:
        raise PlanError("'subtasks' must be a non-empty list")
    out = []
    for i, s in enumerate(subs):
        if isinstance(s, str):
            s = {"title": s}
        if not isinstance(s, dict) or not isinstance(s.get("title"), str) or not s["title"]:
            raise PlanError(f"subtask {i + 1} has no 'title'")
        out.append(Subtask(title=s["title"], ops=_str_list(s.get("ops"), "ops"),
                           description=str(s.get("description") or "")))
    return Plan(out, *(_str_list(data.get(k), k) for k in LIST_KEYS))


def fallback_plan(reference_ops: list[str] | None = None) -> Plan:
    """One subtask covering the whole model (recorded with ``fallback=True``)."""
    return Plan([Subtask("whole model", reference_ops or [],
                         "Implement the whole forward pass with custom kernels.")],
                fallback=True)
