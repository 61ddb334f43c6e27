"""Answers from a recorded JSONL file, for fixtures, demos and CI.

Each line is ``{"role": ..., "task": ..., "turn": N, "response": "...", "delay_s": 0.0}``.
``role`` and ``task`` are optional (absent = any); ``turn`` is the index of the call for that
role within one trajectory (0 = the first planner call, the first coder call, ...).
Lookup, for the n-th call of ``role`` in a trajectory on ``task``:

1. a record with that role, task and turn;
2. a record with that role and turn and no task;
3. otherwise the records of that role (task-matching first, then task-less) in file order,
   taken cyclically by n.

``delay_s`` simulates model latency (the GPU check uses it to overlap LLM time with builds).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from agents.backends.base import BackendError, Completion, Message


def load_records(paths: str | list[str]) -> list[dict[str, Any]]:
    out = []
    for p in [paths] if isinstance(paths, str) else list(paths):
        path = Path(p).expanduser()
        if not path.is_file():
            raise BackendError(f"replay file {path} does not exist; pass model.path=FILE.jsonl")
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise BackendError(f"replay file {path} line {n} is not JSON ({e.msg})") from e
            if "response" not in rec:
                raise BackendError(f"replay file {path} line {n} has no 'response'")
            out.append(rec)
    return out


class ReplayBackend:
    def __init__(self, cfg: dict[str, Any]) -> None:
        self.records = load_records(cfg["path"])
        self.name = cfg.get("name") or f"replay:{Path(str(cfg['path'])).name}"
        self._calls: dict[tuple[str, str], int] = defaultdict(int)

    def lookup(self, role: str | None, task: str | None, n: int) -> dict[str, Any]:
        recs = self.records
        for cond in (
            lambda r: r.get("role") == role and r.get("task") == task and r.get("turn") == n,
            lambda r: r.get("role") == role and r.get("task") is None and r.get("turn") == n,
        ):
            hit = [r for r in recs if cond(r)]
            if hit:
                return hit[0]
        pool = [r for r in recs if r.get("role") in (role, None) and r.get("task") == task
                and r.get("turn") is None]
        pool = pool or [r for r in recs if r.get("role") in (role, None) and r.get("task") is None
                        and r.get("turn") is None]
        if not pool:
            raise BackendError(f"replay file has no answer for role={role} task={task} turn={n}")
        return pool[n % len(pool)]

    async def chat(self, messages: list[Message], meta: dict[str, Any] | None = None,
                   **sampling: Any) -> Completion:
        meta = meta or {}
        role, task = meta.get("role"), meta.get("task_id")
        key = (str(meta.get("trajectory_id")), str(role))
        n = self._calls[key]
        self._calls[key] += 1
        t0 = time.perf_counter()
        rec = self.lookup(role, task, n)
        if rec.get("delay_s"):
            await asyncio.sleep(float(rec["delay_s"]))
        text = rec["response"]
        return Completion(text=text, prompt_tokens=sum(len(m["content"]) // 4 for m in messages),
                          completion_tokens=len(text) // 4,
                          latency_s=time.perf_counter() - t0,
                          finish_reason=rec.get("finish_reason", "stop"))

    async def aclose(self) -> None:
        return None
