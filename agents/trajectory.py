"""One Planner/Coder/Verifier trajectory on one task, routed by the state machine.

``run_trajectory`` never raises for an LLM backend failure or a timeout: it stops with a
recorded reason and returns everything it did, so the miner can write it atomically.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agents.backends.base import BackendError
from agents.coder import Coder
from agents.feedback import profile_text, render_feedback
from agents.plan import Plan
from agents.planner import Planner
from agents.reference_ops import reference_ops
from agents.state_machine import Budgets, Outcome, StateMachine
from agents.turns import Turn, now
from agents.verifier import Verifier


@dataclass
class TrajectoryOutcome:
    turns: list[Turn]
    stop_reason: str
    plan: Plan | None
    best_turn: int | None = None      # index into turns (the coder turn)
    best_speedup: float | None = None
    best_correct: bool = False
    best_code: str | None = None
    started_at: datetime = field(default_factory=now)
    ended_at: datetime = field(default_factory=now)
    wall_s: float = 0.0
    error: str | None = None
    decisions: list[dict[str, str]] = field(default_factory=list)


@dataclass
class Agents:
    planner: Planner
    coder: Coder
    verifier: Verifier
    budgets: Budgets


def _history(sm: StateMachine, turns: list[Turn]) -> str:
    lines = []
    for t in turns:
        if t.role == "verifier":
            lines.append(f"- subtask {t.subtask_index}: {(t.feedback or {}).get('summary', t.status)}")
    lines += [f"- decision: {d.action} ({d.reason})" for d in sm.history[-4:]]
    return "\n".join(lines[-10:]) or "(nothing)"


async def run_trajectory(task: Any, agents: Agents, meta: dict[str, Any]) -> TrajectoryOutcome:
    budgets = agents.budgets
    t0 = time.monotonic()
    out = TrajectoryOutcome(turns=[], stop_reason="", plan=None)
    sm = StateMachine(budgets)
    ops = reference_ops(task.source)
    try:
        await asyncio.wait_for(_loop(task, agents, meta, sm, ops, out),
                               timeout=budgets.trajectory_timeout_s)
    except TimeoutError:
        sm.stop("timeout")
    except BackendError as e:
        out.error = str(e)
        sm.stop("backend_error")
    except asyncio.CancelledError:
        sm.stop("cancelled")
        _finish(out, sm, t0)
        raise
    _finish(out, sm, t0)
    return out


def _finish(out: TrajectoryOutcome, sm: StateMachine, t0: float) -> None:
    out.stop_reason = sm.stop_reason or "cancelled"
    out.decisions = [{"action": d.action, "reason": d.reason} for d in sm.history]
    coder_turns = [i for i, t in enumerate(out.turns) if t.role == "coder"]
    if sm.best.turn is not None and sm.best.turn < len(coder_turns):
        i = coder_turns[sm.best.turn]
        out.best_turn, out.best_code = i, out.turns[i].code
        out.best_speedup, out.best_correct = sm.best.speedup, True
    out.ended_at = now()
    out.wall_s = time.monotonic() - t0


async def _loop(task, agents: Agents, meta, sm: StateMachine, ops, out: TrajectoryOutcome):
    turns = out.turns
    last_result: dict | None = None
    ref_profile = await agents.verifier.reference_profile(task)  # the Planner sees it from the start
    plan, pturn = await agents.planner.plan(task.source, ops, ref_profile or profile_text(None), meta)
    turns.append(pturn)
    out.plan = plan
    sm.replanned(len(plan.subtasks))
    base_code: str | None = None        # best correct program of the previous subtask
    prev: Turn | None = None            # the last coder turn and its verifier turn
    prev_v: Turn | None = None
    mode = "draft"
    t0 = time.monotonic()
    while True:
        if mode == "draft":
            ct = await agents.coder.write(task.source, plan, sm.subtask, meta, previous=base_code)
            ct.parent = _index(turns, prev) if base_code is not None else None
        else:
            ct = await agents.coder.write(task.source, plan, sm.subtask, meta, previous=prev.code,
                                          feedback=render_feedback(prev_v.feedback), mode=mode)
            ct.parent = _index(turns, prev)
            ct.feedback = {**(ct.feedback or {}), "given": prev_v.feedback}
        turns.append(ct)
        vt = await agents.verifier.verify(task, ct, meta)
        vt.parent = len(turns) - 1
        turns.append(vt)
        last_result = vt.result
        correct = bool(vt.result.get("correct")) and vt.status == "ok"
        d = sm.observe(Outcome(correct, vt.speedup if correct else None, vt.status or "invalid"),
                       elapsed_s=time.monotonic() - t0)
        vt.feedback["decision"] = {"action": d.action, "reason": d.reason}
        if d.action == "stop":
            return
        if d.action == "replan":
            best = out.turns[_coder_index(turns, sm.best.turn)].code if sm.best.turn is not None else None
            plan, pturn = await agents.planner.plan(
                task.source, ops, profile_text(last_result), meta,
                history=_history(sm, turns), best=f"\n```python\n{best}\n```" if best else "none")
            turns.append(pturn)
            out.plan = plan
            sm.replanned(len(plan.subtasks))
            base_code, prev, prev_v, mode = None, None, None, "draft"
            continue
        if d.action == "advance":
            base_code, prev, mode = ct.code, ct, "draft"
            continue
        prev, prev_v, mode = (ct, vt, d.action) if ct.code is not None or prev is None else (prev, vt, d.action)
        if prev.code is None:  # nothing to revise yet: draft again from scratch
            mode = "draft"


def _index(turns: list[Turn], t: Turn | None) -> int | None:
    return None if t is None else next(i for i, x in enumerate(turns) if x is t)


def _coder_index(turns: list[Turn], n: int) -> int:
    return [i for i, t in enumerate(turns) if t.role == "coder"][n]
