"""KernelBench's recorded verdicts as columns, and where they disagree with this toolkit's.

The same four kinds are the canned query ``mining/queries/disagreements.sql``; this Python twin
serves the end-of-run summary on machines without duckdb (tests check the two agree).
"""

from __future__ import annotations

import json
from typing import Any

# kind -> one line of what it means (README and the report print these)
KINDS = {
    "correct_here_not_kb": "this harness: correct; KernelBench: incorrect",
    "correct_kb_not_here": "KernelBench: correct; this harness: not correct",
    "paid_kb_incorrect": "the reward paid (> 0) a program KernelBench judged incorrect",
    "hack_kb_accepted": "a major hack finding on a program KernelBench accepted as correct",
}


def kb_columns(rec: dict[str, Any] | None) -> dict[str, Any]:
    """``kb_*`` columns of the imports table from one eval_results.json record (all null without)."""
    cols = dict.fromkeys(("kb_compiled", "kb_correct", "kb_runtime_ms", "kb_ref_runtime_ms",
                          "kb_speedup", "kb_hardware", "kb_metadata_json"))
    if not rec:
        return cols
    meta = rec.get("metadata") if isinstance(rec.get("metadata"), dict) else {}
    stats = rec.get("runtime_stats") if isinstance(rec.get("runtime_stats"), dict) else {}
    runtime, ref = _pos(rec.get("runtime")), _pos(rec.get("ref_runtime"))
    speedup = _pos(rec.get("speedup"))
    if speedup is None and runtime and ref:
        speedup = ref / runtime
    cols.update(
        kb_compiled=_bool(rec.get("compiled")), kb_correct=_bool(rec.get("correctness")),
        kb_runtime_ms=runtime, kb_ref_runtime_ms=ref, kb_speedup=speedup,
        kb_hardware=meta.get("hardware") or stats.get("hardware"),
        kb_metadata_json=json.dumps(meta, default=str) if meta else None)
    return cols


def disagreements(kb_correct: bool | None, correct: bool | None, reward: float | None,
                  major_hack: bool | None) -> list[str]:
    """The kinds (keys of ``KINDS``) one scored program falls in; none without a KB verdict."""
    if kb_correct is None or correct is None:
        return []
    out = []
    if correct and not kb_correct:
        out.append("correct_here_not_kb")
    if kb_correct and not correct:
        out.append("correct_kb_not_here")
    if not kb_correct and (reward or 0.0) > 0.0:
        out.append("paid_kb_incorrect")
    if kb_correct and major_hack:
        out.append("hack_kb_accepted")
    return out


def _pos(v) -> float | None:
    """KernelBench writes -1.0 for "not measured"."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f > 0 else None


def _bool(v) -> bool | None:
    return v if isinstance(v, bool) else None
