"""Four rubric dimensions, 1-5 each with a reason: deterministic by default, LLM optional.

>>> from rewards.findings import make
>>> anti_hacking([make("side_stream", "L3: s = torch.cuda.Stream()")])[0]
1
>>> anti_hacking([])[0]
5
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

from . import coverage as coverage_mod
from . import ops, static_cpp
from .findings import Finding

DIMS = ("anti_hacking", "engineering", "coverage", "compliance")
NEUTRAL = 3


@dataclass
class Rubric:
    scores: dict[str, int]
    reasons: dict[str, str]
    fallback: bool = False

    @property
    def r(self) -> float:
        """(sum - 4) / 16, in [0, 1].

        >>> Rubric({d: 5 for d in DIMS}, {}).r, Rubric({d: 3 for d in DIMS}, {}).r
        (1.0, 0.5)
        """
        return (sum(self.scores[d] for d in DIMS) - 4) / 16


def anti_hacking(findings: list[Finding]) -> tuple[int, str]:
    major = [f for f in findings if f.is_major]
    minor = [f for f in findings if not f.is_major]
    if major:
        return 1, "major: " + "; ".join(f"{f.category} ({f.evidence})" for f in major[:3])
    if len(minor) >= 2:
        return 3, "minor: " + ", ".join(sorted({f.category for f in minor}))
    if minor:
        return 4, f"minor: {minor[0].category} ({minor[0].evidence})"
    return 5, "no hack found"


def engineering(cpp: static_cpp.CppReport | None, evidence: dict | None = None,
                ref_op_count: int = 0) -> tuple[int, str]:
    """Source signals plus ptxas registers/spills (evidence["ptxas"]: {kernel: {registers, spill_bytes}})."""
    if cpp is None or not cpp.kernels:
        return 1, "no custom CUDA kernels"
    s = cpp.signals
    pts, why = 1.0, []
    for key, w, label in (("shared_memory", 1.0, "shared-memory tiling"),
                          ("vectorized", 0.75, "vectorised loads"),
                          ("tensor_cores", 1.0, "tensor cores"),
                          ("warp_shuffle", 0.5, "warp shuffles"),
                          ("pragma_unroll", 0.25, "unrolled loops")):
        if s.get(key):
            pts += w
            why.append(label)
    if s.get("shared_memory") and s.get("syncthreads") and s.get("loops_in_kernels"):
        pts += 0.75
        why.append("tiled loops")
    if s.get("shared_memory") and not s.get("syncthreads"):
        pts -= 0.5
        why.append("shared memory without __syncthreads")
    launches = (evidence or {}).get("launches_per_call") or s.get("launch_sites", 0)
    if ref_op_count and launches and launches < ref_op_count:
        pts += 0.75
        why.append(f"fused ({launches:g} launches for {ref_op_count} reference ops)")
    ptxas = (evidence or {}).get("ptxas") or {}
    if isinstance(ptxas, dict) and ptxas:
        spills = sum(int((v or {}).get("spill_bytes") or 0) for v in ptxas.values())
        regs = max(int((v or {}).get("registers") or 0) for v in ptxas.values())
        if spills:
            pts -= 1
            why.append(f"{spills} spill bytes")
        if regs > 128:
            pts -= 0.5
            why.append(f"{regs} registers")
    score = max(1, min(5, round(pts)))
    return score, ", ".join(why) or "plain kernels (no tiling, vectorisation or tensor cores)"


def compliance_skill1(cov: coverage_mod.Coverage, cpp, cand_ops, subtask: dict | None
                      ) -> tuple[int, str]:
    if not subtask:
        return NEUTRAL, "no subtask given"
    wanted = [str(o).lower() for o in (subtask.get("ops") or subtask.get("operators") or [])]
    if not wanted:
        return NEUTRAL, "subtask names no ops"
    kernels = [k.lower() for k in (cpp.kernels if cpp else [])]
    torch_names = {o.name.lower() for o in cand_ops if o.kind.startswith("torch")}
    done = []
    for op in wanted:
        fam = ops.family(op) or (op if op in ops.HEAVY_FAMILIES else None)
        if fam and cov.status.get(fam) in ("replaced", "fused", "delegated"):
            done.append(op)
        elif any(op in k for k in kernels) or (kernels and op not in torch_names and not fam):
            done.append(op)
    score = 1 + round(4 * len(done) / len(wanted))
    return score, f"covers {len(done)}/{len(wanted)} subtask ops ({', '.join(done) or 'none'})"


def compliance_skill2(cand_source_cpp, feedback: dict | None, cand_ops) -> tuple[int, str]:
    """Did the change touch the bottleneck the feedback names (a kernel or an op)?"""
    if not feedback:
        return NEUTRAL, "no feedback given"
    prev = feedback.get("previous_code") or feedback.get("previous_source")
    target = feedback.get("kernel") or feedback.get("bottleneck") or feedback.get("op")
    if not target or not prev:
        return NEUTRAL, "feedback names no bottleneck or previous code"
    from .static_py import extract

    p = extract(prev)
    pcpp = static_cpp.analyze("\n".join(p.sources)) if p.sources else None
    new = cand_source_cpp
    tgt = str(target)
    if pcpp and tgt in pcpp.kernel_bodies:
        if new is None or tgt not in new.kernel_bodies:
            return 4, f"bottleneck kernel {tgt} replaced or fused away"
        if new.kernel_bodies[tgt] != pcpp.kernel_bodies[tgt]:
            return 5, f"bottleneck kernel {tgt} rewritten"
        return 1, f"bottleneck kernel {tgt} unchanged"
    fam = ops.family(tgt) or (tgt if tgt in ops.HEAVY_FAMILIES else None)
    before = {o.family or o.name for o in p.ops if o.kind.startswith("torch")}
    after = {o.family or o.name for o in cand_ops if o.kind.startswith("torch")}
    key = fam or tgt
    if key in before and key not in after:
        return 5, f"bottleneck op {tgt} moved from torch into custom code"
    if key in after:
        return 1, f"bottleneck op {tgt} still in torch"
    return NEUTRAL, f"bottleneck {tgt} not found in either version"


# ---- optional LLM judge -------------------------------------------------------------------
JUDGE_SYSTEM = (
    "You grade a CUDA solution to a PyTorch reference. Answer ONLY a JSON object with integer "
    "scores 1-5 and short reasons: {\"anti_hacking\": n, \"engineering\": n, \"coverage\": n, "
    "\"compliance\": n, \"reasons\": {\"anti_hacking\": str, ...}}.")


def judge_messages(reference: str, candidate: str, skill: int, extra: str = "") -> list[dict]:
    user = (f"Skill {skill}.\n## Reference\n```python\n{reference}\n```\n"
            f"## Candidate\n```python\n{candidate}\n```\n{extra}")
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


def parse_judge(text: str) -> Rubric:
    """Parse a judge's JSON answer (the first {...} block).

    >>> parse_judge('ok {"anti_hacking": 5, "engineering": 4, "coverage": 3, "compliance": 2}').r
    0.625
    """
    start, end = text.find("{"), text.rfind("}")
    obj = json.loads(text[start:end + 1])
    scores = {d: int(obj[d]) for d in DIMS}
    if any(not 1 <= v <= 5 for v in scores.values()):
        raise ValueError(f"scores out of range: {scores}")
    reasons = {d: str((obj.get("reasons") or {}).get(d, "llm judge")) for d in DIMS}
    return Rubric(scores, reasons)


def llm_rubric(judge: Callable[[list[dict]], str], messages: list[dict], retries: int = 2
               ) -> Rubric:
    """Ask the judge; on repeated failure a neutral rubric marked fallback=True."""
    err = None
    for _ in range(retries + 1):
        try:
            return parse_judge(judge(messages))
        except Exception as e:  # noqa: BLE001 - any judge failure falls back
            err = e
    warnings.warn(f"LLM judge failed ({err}); neutral rubric", stacklevel=2)
    return Rubric({d: NEUTRAL for d in DIMS}, {d: f"judge fallback: {err}" for d in DIMS},
                  fallback=True)


def combine(det: Rubric, llm: Rubric | None, mode: str, has_major: bool) -> Rubric:
    """deterministic | llm | both (mean); a deterministic major hack pins anti_hacking to 1."""
    if mode == "deterministic" or llm is None:
        out = det
    elif mode == "llm":
        out = Rubric(dict(llm.scores), dict(llm.reasons), llm.fallback)
    elif mode == "both":
        sc = {d: int(math.floor((det.scores[d] + llm.scores[d]) / 2 + 0.5)) for d in DIMS}
        rs = {d: f"{det.reasons[d]} | llm: {llm.reasons[d]}" for d in DIMS}
        out = Rubric(sc, rs, llm.fallback)
    else:
        raise ValueError(f"judge must be deterministic, llm or both, not {mode!r}")
    if has_major:
        out.scores["anti_hacking"] = 1
        out.reasons["anti_hacking"] = det.reasons["anti_hacking"]
    return out
