"""Out of memory beside other candidates: the harness's doing, not the candidate's (issue 17).

Up to ``harness.resident`` candidates are loaded on one GPU at once, beside reference and
profiler workers and the parent's copies of reference outputs. On the H100 (session 18, 16 real
Gemini Level 3 programs) that filled the card (79.1 GiB peak) and one honest program,
``level_3_problem_6``, ran out of memory in its timing phase and was judged ``runtime_error``;
in session 14's run of the same programs it had passed. A verdict must not depend on who else
was resident, so such a failure is run once more with every resident place of its slot taken
(``harness.oom_retry_alone``); an out-of-memory then is the candidate's own. Reference and spare
workers stay on the device meanwhile: alone means no other candidate, not an empty card. A
candidate that raises the error itself gains only a second judgement: the same trials in a new
worker, a new secret timing plan.
"""

from __future__ import annotations

import re

_OOM = re.compile(r"\bOutOfMemoryError\b|\bCUDA out of memory\b|\bCUDA error: out of memory\b"
                  r"|DefaultCPUAllocator: can't allocate memory")


def out_of_memory(status: str | None, error: str | None) -> bool:
    """Whether a failed run ran out of device or host memory.

    >>> out_of_memory("runtime_error", "timing phase: OutOfMemoryError: CUDA out of memory. Tried to allocate 1.79 GiB")
    True
    >>> out_of_memory("runtime_error", "correctness phase: RuntimeError: CUDA error: out of memory")
    True
    >>> out_of_memory("incorrect", "output 0 differs from the reference")
    False
    >>> out_of_memory("ok", None)
    False
    """
    return status in ("runtime_error", "crashed") and bool(error) and bool(_OOM.search(error))
