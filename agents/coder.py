"""The Coder: drafts a subtask, or revises the previous program from Verifier feedback.

Every answer is reduced to one complete ``ModelNew`` program by ``agents.extract``; a
malformed answer is recorded on the turn (``malformed``) and never reaches the harness.
"""

from __future__ import annotations

from typing import Any

from agents.backends.base import Backend
from agents.extract import extract_code
from agents.plan import Plan
from agents.templates import render
from agents.turns import Turn

DEVICE_TEXT = {
    "cuda": ("CUDA kernels", "Put kernels in cuda_sources; include only <cuda_runtime.h> there "
             "when you can (torch/extension.h in CUDA sources doubles build time)."),
    "cpu": ("C++ kernels (CPU)", "Put kernels in cpp_sources and list them in functions=[...]."),
}

INSTRUCTIONS = {
    "retry": "The program failed. Fix the problems the Verifier names; keep what works.",
    "optimize": "The program is correct but not fast enough. Make it faster following the "
                "Verifier's profile, and keep it correct.",
}


class Coder:
    def __init__(self, backend: Backend, device: str = "cuda",
                 sampling: dict[str, Any] | None = None) -> None:
        self.backend = backend
        self.device = "cpu" if device == "cpu" else "cuda"
        self.sampling = sampling or {}

    def system(self) -> str:
        kernels, notes = DEVICE_TEXT[self.device]
        return render("coder_system", device_kernels=kernels, device_notes=notes)

    async def write(self, reference: str, plan: Plan, subtask: int, meta: dict[str, Any],
                    previous: str | None = None, feedback: str | None = None,
                    mode: str = "draft") -> Turn:
        """``mode``: ``draft`` (a new subtask, optionally on top of ``previous``), ``retry``
        or ``optimize`` (a revision of ``previous`` from ``feedback``)."""
        st = plan.subtasks[subtask]
        common = dict(reference=reference.strip(), plan=plan.render(),
                      subtask_number=subtask + 1, n_subtasks=len(plan.subtasks),
                      subtask=st.brief())
        if mode == "draft":
            base = (f"Build on your program so far (it is correct):\n\n```python\n{previous}\n```\n\n"
                    if previous else "")
            user = render("coder_draft", base=base, **common)
        else:
            user = render("coder_revise", previous=previous or "(none)",
                          feedback=feedback or "(none)", instruction=INSTRUCTIONS[mode], **common)
        messages = [{"role": "system", "content": self.system()},
                    {"role": "user", "content": user}]
        turn = Turn(role="coder", action="draft" if mode == "draft" else "revise",
                    messages=messages, subtask_index=subtask, subtask=vars(st))
        c = await self.backend.chat(messages, meta={**meta, "role": "coder"}, **self.sampling)
        turn.add_completion(c)
        ex = extract_code(c.text)
        turn.code, turn.malformed = ex.code, ex.malformed
        if c.finish_reason == "length" and ex.malformed:
            turn.malformed = f"{ex.malformed} (generation hit max_tokens)"
        if ex.notes:
            turn.feedback = {"extraction_notes": ex.notes}
        return turn.finish()
