"""The oracle's precision: TF32 switches set in every worker before any task code runs, and
what a candidate changed.

torch's own defaults are TF32 off for matmuls and on for cuDNN convolutions (KernelBench leaves
them so). The harness default turns both off, so the reference computes in true fp32 and a
candidate that enables TF32 is seen doing so (``precision_flags_changed``).
"""

from __future__ import annotations

import json
import os

ENV = "KM_PRECISION"  # JSON of HarnessConfig.precision, set by the evaluator for every worker


def apply(precision: dict | None) -> None:
    import torch

    p = precision or {}
    torch.backends.cuda.matmul.allow_tf32 = bool(p.get("matmul_tf32", False))
    torch.backends.cudnn.allow_tf32 = bool(p.get("cudnn_tf32", False))


def apply_from_env() -> None:
    if os.environ.get(ENV):
        apply(json.loads(os.environ[ENV]))


def flags() -> dict:
    import torch

    return {"allow_tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
            "allow_tf32_cudnn": bool(torch.backends.cudnn.allow_tf32),
            "matmul_precision": torch.get_float32_matmul_precision(),
            "allow_fp16_reduction": bool(torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction)}


def changed(before: dict, after: dict) -> dict:
    """{flag: [before, after]} for every flag whose value differs.

    >>> changed({"a": False, "b": "highest"}, {"a": True, "b": "highest"})
    {'a': [False, True]}
    """
    return {k: [before.get(k), v] for k, v in after.items() if before.get(k) != v}
