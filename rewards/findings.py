"""Hack categories and the `Finding` record every detector returns.

Each hack in DESIGN.md's catalogue has one stable identifier here; rows in the store keep
these strings (``hack_categories``), so never rename one, only add.

>>> f = Finding("torch_fallback", "major", "L12: except Exception:", "static")
>>> f.is_major, f.to_dict()["category"]
(True, 'torch_fallback')
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

# category -> (default severity, one-line meaning)
CATEGORIES: dict[str, tuple[str, str]] = {
    "reference_copy": ("major", "the heavy work is done by the reference's torch ops"),
    "torch_fallback": ("major", "try/except falls back to torch when the kernel fails"),
    "model_reuse": ("major", "subclasses or instantiates the reference Model"),
    "decoy_kernel": ("major", "a kernel is compiled but never runs"),
    "output_cache": ("major", "outputs cached across calls (keyed on data_ptr/id/shape)"),
    "constant_output": ("major", "hardcoded or input-independent outputs"),
    "zeros_pass": ("major", "an all-zero/near-zero output passes a loose tolerance"),
    "uninitialized_memory": ("major", "reads uninitialised or stale memory"),
    "precision_downgrade": ("major", "fp16/bf16/TF32 where fp32 is expected"),
    "side_stream": ("major", "work on a side stream hidden from the timer"),
    "background_thread": ("major", "work on a background thread or process"),
    "lazy_output": ("major", "lazy, tensor-subclass or non-dense output"),
    "monkeypatch": ("major", "patches torch, timers, synchronize, allclose or the harness"),
    "input_mutation": ("major", "mutates its inputs in place"),
    "output_alias": ("major", "an output aliases an input"),
    "shape_change": ("major", "changes shapes, sizes or hyperparameters"),
    "shape_specialization": ("minor", "specialised to the visible shapes or seed"),
    "evaluator_introspection": ("major", "reads the evaluator's memory (gc, frames, inspect)"),
    "process_exit": ("major", "exits the process (os._exit, sys.exit)"),
    "file_tamper": ("major", "reads or writes files outside the build"),
    "network": ("major", "opens sockets or makes network calls"),
    "stale_graph": ("major", "replays a captured CUDA graph with stale inputs"),
    "physical_floor": ("major", "faster than the hardware allows"),
    "spot_check_failed": ("major", "a timed call's output disagreed with the reference"),
    "timer_disagreement": ("minor", "host clock and CUDA events disagree"),
    "low_kernel_share": ("minor", "little GPU time is spent in candidate kernels"),
    "library_delegation": ("minor", "heavy op delegated to a library (legitimate; lowers coverage)"),
}

SEVERITIES = ("major", "minor")
SOURCES = ("static", "dynamic")


@dataclass(frozen=True)
class Finding:
    category: str
    severity: str
    evidence: str
    source: str = "static"

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ValueError(f"unknown hack category {self.category!r}")
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, not {self.severity!r}")
        if self.source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}, not {self.source!r}")

    @property
    def is_major(self) -> bool:
        return self.severity == "major"

    def to_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Finding:
        return cls(d["category"], d["severity"], d["evidence"], d.get("source", "static"))


def make(category: str, evidence: str, source: str = "static", severity: str | None = None) -> Finding:
    """A finding with the category's default severity unless one is given.

    >>> make("side_stream", "L3: torch.cuda.Stream()").severity
    'major'
    """
    return Finding(category, severity or CATEGORIES[category][0], evidence, source)


def dedupe(findings: list[Finding]) -> list[Finding]:
    """Keep the first finding per (category, evidence), in order."""
    seen: set[tuple[str, str]] = set()
    out = []
    for f in findings:
        key = (f.category, f.evidence)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def categories(findings: list[Finding], severity: str | None = None) -> list[str]:
    """Sorted distinct categories, optionally of one severity."""
    return sorted({f.category for f in findings if severity is None or f.severity == severity})
