"""The Planner: reference (+ system-level profile) -> a validated JSON plan.

A malformed answer gets one clear retry naming the problem; a second malformed answer yields
the single-subtask fallback plan, recorded with ``fallback: true`` on the turn.
"""

from __future__ import annotations

from typing import Any

from agents.backends.base import Backend
from agents.extract import extract_json_text, to_text
from agents.plan import Plan, PlanError, fallback_plan, parse_plan
from agents.templates import render
from agents.turns import Turn


class Planner:
    def __init__(self, backend: Backend, sampling: dict[str, Any] | None = None) -> None:
        self.backend = backend
        self.sampling = sampling or {}

    async def plan(self, reference: str, ops: list[str], profile: str, meta: dict[str, Any],
                   history: str | None = None, best: str | None = None) -> tuple[Plan, Turn]:
        action = "replan" if history else "plan"
        user = render("planner_user", reference=reference.strip(), profile=profile)
        if ops:
            user += "\n\nReference operators: " + ", ".join(ops)
        if history:
            user += "\n\n" + render("planner_replan", history=history, best=best or "none")
        messages = [{"role": "system", "content": render("planner_system")},
                    {"role": "user", "content": user}]
        turn = Turn(role="planner", action=action, messages=messages)
        c = await self.backend.chat(messages, meta={**meta, "role": "planner"}, **self.sampling)
        turn.add_completion(c)
        text = to_text(c.text)[0]
        try:
            plan = parse_plan(extract_json_text(text))
        except PlanError as first:
            retry = messages + [{"role": "assistant", "content": text},
                                {"role": "user", "content": render("planner_retry",
                                                                   problem=str(first))}]
            turn.messages = retry
            c2 = await self.backend.chat(retry, meta={**meta, "role": "planner"}, **self.sampling)
            turn.add_completion(c2)
            turn.response = text + "\n\n<<retry>>\n\n" + c2.text
            try:
                plan = parse_plan(extract_json_text(c2.text))
                turn.malformed = f"first answer: {first}; the retry was valid"
            except PlanError as second:
                plan = fallback_plan(ops)
                turn.malformed = f"first answer: {first}; retry: {second}; used fallback plan"
        turn.feedback = {"plan": plan.to_dict()}
        turn.status = "fallback" if plan.fallback else "ok"
        return plan, turn.finish()
