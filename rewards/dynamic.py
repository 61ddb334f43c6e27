"""Findings from the harness's dynamic evidence (`EvalResult.evidence`, docs/interfaces.md).

>>> [f.category for f in from_evidence({"side_stream": True, "input_mutated": True})]
['input_mutation', 'side_stream']
>>> from_evidence({"decoy_kernels": ["k2"], "launched_candidate_kernels": ["k1"]})[0].severity
'minor'
"""

from __future__ import annotations

from typing import Any

from .findings import Finding, make


def _d(category: str, evidence: str, severity: str | None = None) -> Finding:
    return make(category, evidence, source="dynamic", severity=severity)


def from_evidence(ev: dict[str, Any], runtime_us: float | None = None,
                  cfg: dict | None = None) -> list[Finding]:
    cfg = cfg or {}
    out: list[Finding] = []
    share = ev.get("candidate_kernel_share")
    decoys = ev.get("decoy_kernels") or []
    launched = ev.get("launched_candidate_kernels")
    if decoys:
        hollow = (launched is not None and not launched) or (
            share is not None and share < cfg.get("decoy_share", 0.05))
        sev = "major" if hollow or launched is None else "minor"
        out.append(_d("decoy_kernel", f"harness: declared kernels never ran: {sorted(decoys)}",
                      sev))
    if share is not None and share < cfg.get("low_share", 0.2) and not decoys:
        out.append(_d("low_kernel_share", f"harness: candidate_kernel_share={share:.2f}"))
    if ev.get("output_aliases_input"):
        out.append(_d("output_alias", "harness: an output shares storage with an input"))
    if ev.get("input_mutated"):
        out.append(_d("input_mutation", "harness: an input changed during the call"))
    if ev.get("side_stream"):
        out.append(_d("side_stream", f"harness: kernels ran on streams {ev.get('streams')}"))
    if ev.get("timer_disagreement"):
        out.append(_d("timer_disagreement",
                      f"harness: wall/event timer ratio {ev.get('timer_ratio')}"))
    if ev.get("constant_output"):
        out.append(_d("constant_output", "harness: outputs identical across different inputs"))
    if ev.get("zeros_would_pass") or ev.get("ref_near_zero"):
        out.append(_d("zeros_pass", "harness: an all-zero output passes the tolerance",
                      severity="minor"))
    if ev.get("spot_check_failed"):
        out.append(_d("spot_check_failed", "harness: a timed call's output disagreed"))
    if ev.get("non_dense_output"):
        out.append(_d("lazy_output", f"harness: output type {ev['non_dense_output']}"))
    if (ev.get("threads_started") or 0) > 0:
        # threads that run no candidate code (torch.compile's pools) are noted, not a hack;
        # evidence recorded before `threads_candidate` existed keeps the old verdict
        lib = ev.get("threads_candidate") == 0
        out.append(_d("background_thread", f"harness: {ev['threads_started']} threads started"
                      + (f", none running candidate code: {ev.get('thread_names')}" if lib else ""),
                      severity="minor" if lib else None))
    bad = _precision_changes(ev)
    if bad and not cfg.get("allow_tf32", False):
        out.append(_d("precision_downgrade", f"harness: precision flags {bad}"))
    floor = ev.get("physical_floor_us")
    if floor and runtime_us is not None and not ev.get("floor_skipped") and \
            runtime_us < floor * cfg.get("floor_slack", 0.9):
        out.append(_d("physical_floor",
                      f"harness: runtime {runtime_us:.3g}us below physical floor {floor:.3g}us"))
    if ev.get("uninitialized_read"):
        out.append(_d("uninitialized_memory", f"harness: {ev['uninitialized_read']}"))
    if ev.get("cache_tamper_attributed"):  # only this candidate ran when the cache changed (cachewatch.py)
        what = [f"{p.get('cache')} {str(p.get('key'))[:24]} ({p.get('reason')})" for p in ev["cache_tamper_attributed"][:3]]
        out.append(_d("file_tamper", f"harness: changed the orchestrator's cache: {', '.join(what)}"))
    return sorted(out, key=lambda f: f.category)


def _lowered(flag: str, value: Any) -> bool:
    """Is this flag value below torch's fp32 default? Only matmul TF32 and a matmul precision
    other than "highest" are: cuDNN TF32 and reduced-precision reductions default to True."""
    if "matmul" in flag and "precision" in flag:
        return value not in (None, "highest", "ieee", "none")
    if flag in ("allow_tf32_matmul", "matmul.allow_tf32", "torch.backends.cuda.matmul.allow_tf32"):
        return bool(value)
    return False


def _precision_changes(ev: dict[str, Any]) -> list[str]:
    """Downgrades the candidate made: from `precision_flags_changed` ({flag: [before, after]},
    what actually changed) when present, else from the flags after load."""
    changed = ev.get("precision_flags_changed")
    if isinstance(changed, dict):
        return [f"{k}: {v[0]!r} -> {v[1]!r}" for k, v in sorted(changed.items())
                if isinstance(v, list | tuple) and len(v) == 2 and _lowered(k, v[1]) and
                not _lowered(k, v[0])]
    flags = ev.get("precision_flags") or {}
    return [f"{k}={v}" if k == "matmul_precision" else k for k, v in sorted(flags.items())
            if _lowered(k, v)]

