"""Reward layer: hack findings, rubric, rule reward and the combined reward (pure functions).

    findings = rewards.detect(reference_source, candidate_source, result)
    record = rewards.score(reference_source, candidate_source, result, skill=1)
    record.reward, record.to_row()
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .detect import analyze, as_dict, detect
from .findings import CATEGORIES, Finding
from .reward import RewardRecord, combine, rule_reward

__all__ = ["CATEGORIES", "Finding", "RewardRecord", "detect", "score"]


def score(reference_source: str, candidate_source: str, result: Any, skill: int = 1,
          subtask: dict | None = None, feedback: dict | None = None, cfg: Any = None,
          judge: Callable[[list[dict]], str] | None = None) -> RewardRecord:
    """Score one candidate: findings, four rubric dimensions, rule reward, final reward."""
    from . import config, rubric
    from . import coverage as cov_mod

    c = config.load(cfg)
    res = as_dict(result)
    ev = res.get("evidence") or {}
    a = analyze(reference_source, candidate_source, res, c)
    correct = bool(res.get("correct"))
    key = "speedup_vs_compile" if c["baseline"] == "compile" else "speedup"
    speedup = res.get(key)
    rule = rule_reward(correct, speedup, c["r_max"])
    ref_ops = len([o for o in a.ref.ops]) if a.ref else 0
    ref_fams = cov_mod.reference_families(reference_source)
    ref_op_count = max(ref_ops, sum(ref_fams.values()))
    det_scores, det_reasons = {}, {}
    for dim, (s, why) in {
        "anti_hacking": rubric.anti_hacking(a.findings),
        "engineering": rubric.engineering(a.cpp, ev, ref_op_count),
        "coverage": (cov_mod.score(a.cov), a.cov.reason()),
        "compliance": (rubric.compliance_skill1(a.cov, a.cpp, a.cand.ops, subtask) if skill == 1
                       else rubric.compliance_skill2(a.cpp, feedback, a.cand.ops)),
    }.items():
        det_scores[dim], det_reasons[dim] = s, why
    det = rubric.Rubric(det_scores, det_reasons)
    llm = None
    if c["judge"] in ("llm", "both") and judge is not None:
        extra = f"Subtask: {subtask}\n" if subtask else f"Feedback: {feedback}\n" if feedback else ""
        llm = rubric.llm_rubric(judge, rubric.judge_messages(reference_source, candidate_source,
                                                             skill, extra), c["judge_retries"])
    elif c["judge"] in ("llm", "both"):
        llm = rubric.Rubric({d: rubric.NEUTRAL for d in rubric.DIMS},
                            {d: "judge fallback: no judge callable given" for d in rubric.DIMS},
                            fallback=True)
    final_rubric = rubric.combine(det, llm, c["judge"], any(f.is_major for f in a.findings))
    value, major, note = combine(rule, correct, final_rubric, a.findings, skill, c,
                                 ev.get("unverifiable"))
    return RewardRecord(rule=rule, correct=correct, speedup=speedup, rubric=final_rubric.scores,
                        reasons=final_rubric.reasons, rubric_fallback=final_rubric.fallback,
                        findings=a.findings, major_hack=major, reward=value,
                        reward_version=str(c["version"]), skill=skill, notes=note)
