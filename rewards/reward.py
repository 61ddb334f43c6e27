"""Rule reward, the combined (StitchCUDA-shaped) reward, and the RewardRecord row.

>>> rule_reward(True, 2.0, 5.0), rule_reward(False, 9.0, 5.0), rule_reward(True, 7.5, 5.0)
(2.0, 0.0, 5.0)
>>> shaped(2.0, r=0.5, skill=1, cfg={"base_offset": 0.3, "lambda_skill1": 1.0, "cap": 3.0})
2.3
>>> round(shaped(1.0, r=1.0, skill=2, cfg={"base_offset": 0.3, "lambda_skill2": 0.7, "cap": 3.0}), 4)
1.755
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass, field
from typing import Any

from .findings import Finding, categories
from .rubric import DIMS, Rubric


def rule_reward(correct: bool, speedup: float | None, r_max: float) -> float:
    """0 if incorrect; else the speedup clipped to [0, r_max]; NaN (with a warning) if unknown."""
    if not correct:
        return 0.0
    if speedup is None or (isinstance(speedup, float) and math.isnan(speedup)):
        warnings.warn("correct candidate without a speedup: rule reward is NaN", stacklevel=2)
        return float("nan")
    return float(min(max(speedup, 0.0), r_max))


def shaped(rule: float, r: float, skill: int, cfg: dict) -> float:
    """base = rule + offset; shaped = base * (1 + lambda * (r - 0.5)), capped."""
    base = rule + cfg["base_offset"]
    lam = cfg["lambda_skill1"] if skill == 1 else cfg["lambda_skill2"]
    return min(base * (1 + lam * (r - 0.5)), cfg["cap"])


@dataclass
class RewardRecord:
    rule: float
    correct: bool
    speedup: float | None
    rubric: dict[str, int]
    reasons: dict[str, str]
    rubric_fallback: bool
    findings: list[Finding] = field(default_factory=list)
    major_hack: bool = False
    reward: float = 0.0
    reward_version: str = ""
    skill: int = 1
    notes: str = ""

    @property
    def hack_categories(self) -> list[str]:
        return categories(self.findings)

    def to_row(self) -> dict[str, Any]:
        """The score columns of mining/schemas.py SCORES."""
        row = {"rule_reward": self.rule}
        for d in DIMS:
            row[f"rubric_{d}"] = float(self.rubric[d])
        row.update(rubric_fallback=self.rubric_fallback, major_hack=self.major_hack,
                   hack_categories=self.hack_categories,
                   findings_json=json.dumps([f.to_dict() for f in self.findings]),
                   reward=self.reward, reward_version=self.reward_version)
        return row

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form for `python -m mining eval` (reward + findings + components)."""
        return {"reward": self.reward, "rule": self.rule, "rubric": self.rubric,
                "reasons": self.reasons, "rubric_fallback": self.rubric_fallback,
                "major_hack": self.major_hack, "hack_categories": self.hack_categories,
                "findings": [f.to_dict() for f in self.findings],
                "reward_version": self.reward_version, "notes": self.notes}


def combine(rule: float, correct: bool, rubric: Rubric, findings: list[Finding], skill: int,
            cfg: dict, unverifiable: str | None = None) -> tuple[float, bool, str]:
    """(final reward, major_hack, note).

    ``unverifiable`` (the harness's reason: the reference's outputs do not depend on its
    inputs) means passing proves nothing, so speed is not paid: config ``unverifiable: nan``
    gives NaN with a warning (TRL-style: no silent number), ``offset`` gives base_offset only.

    >>> from rewards.rubric import DIMS
    >>> rb = Rubric({d: 5 for d in DIMS}, {})
    >>> cfg = {"base_offset": 0.3, "unverifiable": "offset"}
    >>> combine(2.0, True, rb, [], 1, cfg, unverifiable="outputs equal across trials")
    (0.3, False, 'unverifiable (outputs equal across trials): base_offset only, speed not paid')
    """
    major = any(f.is_major for f in findings)
    if major:
        return 0.0, True, "major hack: reward 0"
    if not correct:
        return 0.0, False, "incorrect: reward 0"
    if unverifiable:
        mode = str(cfg.get("unverifiable", "nan")).lower()
        if mode == "offset":
            return float(cfg["base_offset"]), False, (
                f"unverifiable ({unverifiable}): base_offset only, speed not paid")
        if mode != "nan":
            raise ValueError(f"rewards.unverifiable must be nan or offset, not {mode!r}")
        warnings.warn(f"unverifiable task ({unverifiable}): reward is NaN", stacklevel=2)
        return float("nan"), False, f"unverifiable ({unverifiable}): reward NaN, speed not paid"
    if math.isnan(rule):
        return float("nan"), False, "speedup unknown: reward NaN"
    value = shaped(rule, rubric.r, skill, cfg)
    n_minor = min(sum(1 for f in findings if not f.is_major), int(cfg.get("minor_penalty_max", 3)))
    value *= (1 - cfg["minor_penalty"]) ** n_minor
    note = f"{n_minor} minor finding(s) charged" if n_minor else ""
    return value, False, note
