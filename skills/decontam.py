"""Decontamination: refuse (or flag) samples whose reference is a held-out eval task.

A sample matches when its reference's normalized content hash equals a held-out task's
(``exact``) or its structural hash does (``structural``: renamed variables, reordered constants).
Pure: hashes in, rows out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

MODES = ("refuse", "warn")


@dataclass
class Holdout:
    exact: dict[str, str] = field(default_factory=dict)       # content hash -> task id
    structural: dict[str, str] = field(default_factory=dict)  # structural hash -> task id

    @classmethod
    def from_hashes(cls, items: Iterable[tuple[str, str, str]]) -> Holdout:
        """From ``(task id, content hash, structural hash)`` triples."""
        h = cls()
        for tid, ch, sh in items:
            h.exact[ch] = tid
            h.structural[sh] = tid
        return h

    def match(self, content_hash: str | None, structural_hash: str | None,
              structural: bool = True) -> tuple[str, str] | None:
        """``("exact"|"structural", held-out task id)`` or None."""
        if content_hash in self.exact:
            return "exact", self.exact[content_hash]
        if structural and structural_hash in self.structural:
            return "structural", self.structural[structural_hash]
        return None


@dataclass
class DecontamReport:
    refused: int = 0
    flagged: int = 0
    matches: dict[str, int] = field(default_factory=dict)  # held-out task id -> samples


def decontaminate(rows: list[dict], holdout: Holdout, mode: str = "refuse",
                  structural: bool = True) -> tuple[list[dict], DecontamReport]:
    """Drop (``refuse``) or flag (``warn``: column ``contamination``) matching rows.

    >>> h = Holdout.from_hashes([("t1", "aa", "ss")])
    >>> kept, rep = decontaminate([{"reference_hash": "xx", "reference_structural_hash": "ss"}], h)
    >>> (len(kept), rep.refused, rep.matches)
    (0, 1, {'t1': 1})
    """
    if mode not in MODES:
        raise ValueError(f"decontamination mode must be one of {MODES}, not {mode!r}")
    kept, rep = [], DecontamReport()
    for r in rows:
        m = holdout.match(r.get("reference_hash"), r.get("reference_structural_hash"), structural)
        if m is None:
            kept.append(r)
            continue
        kind, tid = m
        rep.matches[tid] = rep.matches.get(tid, 0) + 1
        if mode == "refuse":
            rep.refused += 1
        else:
            rep.flagged += 1
            kept.append({**r, "contamination": kind})
    return kept, rep
