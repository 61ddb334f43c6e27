"""The Verifier: runs the harness on the Coder's program and turns the result into feedback.

``evaluate`` is an async callable ``(task, code) -> EvalResult`` (the miner wraps
``Evaluator.submit`` so builds and GPU runs overlap with LLM calls). LLM guidance is optional.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from agents.backends.base import Backend
from agents.feedback import make_feedback
from agents.profile_feedback import render_reference
from agents.templates import render
from agents.turns import Turn

EvaluateFn = Callable[[Any, str], Awaitable[Any]]


class Verifier:
    def __init__(self, evaluate: EvaluateFn, target_speedup: float = 1.0,
                 backend: Backend | None = None, guidance: bool = False,
                 sampling: dict[str, Any] | None = None,
                 reference_profile: Callable[[Any], Awaitable[dict]] | None = None) -> None:
        self.evaluate = evaluate
        self._reference_profile = reference_profile
        self.target_speedup = target_speedup
        self.backend = backend if guidance else None
        self.sampling = sampling or {}

    async def reference_profile(self, task: Any) -> str | None:
        """The reference's profile as text for the Planner's first plan; None when unavailable."""
        if self._reference_profile is None:
            return None
        try:
            return render_reference(await self._reference_profile(task))
        except Exception:  # noqa: BLE001 - the plan goes ahead without a profile, never fails on it
            return None

    async def verify(self, task: Any, coder_turn: Turn, meta: dict[str, Any]) -> Turn:
        turn = Turn(role="verifier", action="verify", subtask_index=coder_turn.subtask_index,
                    subtask=coder_turn.subtask)
        if coder_turn.code is None:
            from rewards.harness.result import EvalResult

            result = EvalResult(status="invalid", error=coder_turn.malformed).to_dict()
        else:
            result = (await self.evaluate(task, coder_turn.code)).to_dict()
        fb = make_feedback(result, self.target_speedup)
        if self.backend is not None and coder_turn.code is not None:
            messages = [{"role": "user", "content": render(
                "verifier_guidance", code=coder_turn.code, feedback=json.dumps(fb, indent=1))}]
            turn.messages = messages
            c = await self.backend.chat(messages, meta={**meta, "role": "verifier"},
                                        **self.sampling)
            turn.add_completion(c)
            fb["guidance"] = c.text.strip()[:2000]
        turn.result, turn.feedback = result, fb
        turn.status, turn.speedup = result.get("status"), result.get("speedup")
        turn.code = coder_turn.code
        # the coder turn carries the outcome of evaluating its own code too
        coder_turn.result, coder_turn.status = result, result.get("status")
        coder_turn.speedup = result.get("speedup")
        return turn.finish()
