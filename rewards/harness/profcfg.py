"""The ``harness.profiling`` table: defaults, a deep merge of overrides, unknown keys refused.

Defaults mirror conf/harness/default.yaml (the file users edit); this copy lets the harness run
from a plain dict on GPU nodes without Hydra.
"""

from __future__ import annotations

import copy

DEFAULTS = {
    "system": {"enabled": True, "top": 10, "gap_us": 5.0, "record_shapes": True, "reference_calls": 1,
               "keep_events": False},
    "kernel": {"enabled": True, "reference": True, "candidates": True, "ncu": "auto", "top_k": 3,
               "min_share": 0.05, "min_kernel_us": 5.0, "max_launches": 8, "timeout_s": 90,
               "thresholds": {"busy_pct": 60.0, "launch_us": 5.0}},
    "nsys": {"enabled": True, "timeout_s": 30},
}


def _merge(base: dict, over: dict, where: str) -> dict:
    out = copy.deepcopy(base)
    for k, v in (over or {}).items():
        if k not in base:
            raise ValueError(f"unknown key harness.profiling.{where}{k}; known keys: {sorted(base)}")
        out[k] = _merge(base[k], v, f"{where}{k}.") if isinstance(base[k], dict) and isinstance(v, dict) else v
    return out


def resolve(profiling: dict | None) -> dict:
    """
    >>> resolve({"kernel": {"top_k": 5}})["kernel"]["max_launches"], resolve({"kernel": {"top_k": 5}})["kernel"]["top_k"]
    (8, 5)
    """
    return _merge(DEFAULTS, dict(profiling or {}), "")
