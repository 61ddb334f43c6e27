"""The plain result record of one evaluation; its JSON keys are a stable interface.

`evidence` carries the dynamic observations the reward layer judges (keys documented in
README.md, "Evidence keys"). Every field has a neutral default so a record can be built for a
candidate that never got past the build.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

HARNESS_VERSION = "0.1.0"

STATUSES = ("ok", "compile_error", "runtime_error", "incorrect", "timeout", "crashed", "invalid")


@dataclass
class EvalResult:
    # outcome
    status: str = "invalid"
    compiled: bool = False
    correct: bool = False
    # runtime (microseconds; median and inter-quartile range over timed calls)
    runtime_us: float | None = None
    runtime_iqr_us: float | None = None
    # baselines, measured in a clean process, cached per task hash / GPU / torch / shapes
    ref_runtime_us: float | None = None
    ref_compile_runtime_us: float | None = None
    # speedups
    speedup: float | None = None
    speedup_vs_compile: float | None = None
    # errors against the reference, worst over trials and outputs
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    # run context
    trials: int = 0
    device: str = "cpu"
    gpu: str | None = None
    torch: str = ""
    cuda: str | None = None
    build_s: float | None = None
    cache_hit: bool = False
    # diagnostics
    error: str | None = None
    log_tail: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    harness_version: str = HARNESS_VERSION

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}; expected one of {STATUSES}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=False, default=str)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EvalResult:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})
