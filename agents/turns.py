"""One recorded turn of a trajectory (the TURNS table without provenance, which the miner adds)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from agents.backends.base import Completion


def now() -> datetime:
    return datetime.now(UTC)


@dataclass
class Turn:
    role: str                      # planner | coder | verifier
    action: str                    # plan | replan | draft | revise | verify
    messages: list[dict[str, str]] = field(default_factory=list)
    response: str | None = None
    code: str | None = None
    malformed: str | None = None
    result: dict[str, Any] | None = None
    feedback: dict[str, Any] | None = None
    status: str | None = None
    speedup: float | None = None
    subtask_index: int | None = None
    subtask: dict[str, Any] | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float | None = None
    started_at: datetime = field(default_factory=now)
    ended_at: datetime | None = None
    parent: int | None = None      # index of the parent turn in the trajectory

    def add_completion(self, c: Completion) -> None:
        self.response = c.text
        self.prompt_tokens = (self.prompt_tokens or 0) + (c.prompt_tokens or 0)
        self.completion_tokens = (self.completion_tokens or 0) + (c.completion_tokens or 0)
        self.latency_s = (self.latency_s or 0.0) + c.latency_s

    def finish(self) -> Turn:
        self.ended_at = now()
        return self

    def row(self, trajectory_id: str, task_id: str, index: int) -> dict[str, Any]:
        """The TURNS columns of this turn (provenance is added by the miner)."""
        def js(v):
            return None if v is None else json.dumps(v, default=str)
        return {
            "turn_id": f"{trajectory_id}/t{index:03d}", "trajectory_id": trajectory_id,
            "task_id": task_id, "turn_index": index, "role": self.role, "action": self.action,
            "subtask_index": self.subtask_index, "subtask_json": js(self.subtask),
            "parent_turn_id": None if self.parent is None else f"{trajectory_id}/t{self.parent:03d}",
            "messages_json": js(self.messages), "response": self.response, "code": self.code,
            "malformed": self.malformed, "result_json": js(self.result),
            "feedback_json": js(self.feedback), "status": self.status, "speedup": self.speedup,
            "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
            "latency_s": self.latency_s, "started_at": self.started_at,
            "ended_at": self.ended_at or self.started_at,
        }
