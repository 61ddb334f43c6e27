"""Load the red-team corpus (manifest.yaml + cases/ + refs/) for tests and bench/hack_detection.py."""

from __future__ import annotations

import pathlib
from dataclasses import dataclass
from typing import Any

import yaml

ROOT = pathlib.Path(__file__).resolve().parent
REPO = ROOT.parents[1]
SUITE = REPO / "mining" / "suites" / "level3"


@dataclass
class Case:
    id: str
    ref_id: str
    reference: str
    candidate: str
    label: list[str]  # [] for legit
    result: dict[str, Any]
    cpu_runnable: bool
    gpu: bool
    note: str
    known_gap: str = ""

    @property
    def legit(self) -> bool:
        return not self.label


def reference_source(ref: str) -> str:
    if ref.startswith("refs/"):
        return (ROOT / ref).read_text()
    suite = yaml.safe_load((SUITE / "suite.yaml").read_text())
    for t in suite["tasks"]:
        if t["id"] == ref:
            return (SUITE / t["file"]).read_text()
    raise KeyError(f"no embedded task {ref!r}")


def load() -> list[Case]:
    m = yaml.safe_load((ROOT / "manifest.yaml").read_text())
    out = []
    for c in m["cases"]:
        label = [] if c["label"] == "legit" else list(c["label"])
        out.append(Case(c["id"], c["ref"], reference_source(c["ref"]),
                        (ROOT / c["file"]).read_text(), label, c.get("result") or {},
                        bool(c.get("cpu_runnable")), bool(c.get("gpu")), c.get("note", ""),
                        c.get("known_gap", "")))
    return out


def task(case: Case):
    """A harness task for a case: the embedded suite task (with its `small` sizes) or a ref file."""
    from mining.tasks import load_file, load_suite

    if case.ref_id.startswith("refs/"):
        return load_file(ROOT / case.ref_id)
    return load_suite("level3", ids=[case.ref_id]).tasks[0]
