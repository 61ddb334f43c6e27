"""Turns -> Skill 1 and Skill 2 samples (pure: an Arrow table of turns in, sample rows out).

- Skill 1 (task -> code): a coder ``draft`` turn (or one with no earlier code). Prompt: the
  reference, the subtask spec and the hardware. Response: the turn's code.
- Skill 2 (feedback -> better code): a coder ``revise`` turn whose parent chain reaches an
  earlier coder turn with code (directly, or through the Verifier turn that judged it). Prompt:
  the reference, that previous code and the Verifier's feedback on it. Response: the turn's code.

A coder turn's outcome (status, speedup; failures are kept as negatives) is that of the
Verifier turn that judged it (its child), else the coder turn's own columns.

Samples are identified by a hash of (skill, reference hash, previous code hash, normalized code
hash), so duplicates collapse and re-running ``split`` adds nothing twice.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from skills.fingerprint import content_hash
from skills.render import feedback_text, render_messages, subtask_text, template_version

PROVENANCE_COLS = ("run_id", "round", "policy", "task_hash", "gpu", "torch", "cuda",
                   "harness_version", "reward_version")


@dataclass
class Reference:
    task_id: str
    source: str
    hash: str
    structural_hash: str


@dataclass
class SplitOptions:
    skills: tuple[int, ...] = (1, 2)
    drop_malformed: bool = True      # drop turns whose response held no extractable code
    keep_failures: bool = True       # keep failed candidates as negatives (negative=True)
    require_modelnew: bool = True    # code must define class ModelNew
    min_code_chars: int = 40
    statuses: tuple[str, ...] | None = None  # keep only these mined statuses (None: all)
    hardware: str | None = None      # prompt hardware line; None: the turn's gpu column


@dataclass
class SplitReport:
    considered: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    duplicates: int = 0

    def drop(self, why: str) -> None:
        self.dropped[why] = self.dropped.get(why, 0) + 1


_WS = re.compile(r"\s+")


def code_hash(code: str) -> str:
    """Normalized code hash: AST-normalized when the code parses, whitespace-collapsed otherwise.

    >>> code_hash("x = 1  # c\\n") == code_hash("x=1")
    True
    """
    try:
        return content_hash(code)
    except (SyntaxError, ValueError):
        return hashlib.sha256(_WS.sub(" ", code).strip().encode()).hexdigest()[:16]


def sample_id(skill: int, ref_hash: str, prev_hash: str | None, chash: str) -> str:
    key = f"{skill}|{ref_hash}|{prev_hash or ''}|{chash}"
    return hashlib.sha256(key.encode()).hexdigest()[:20]


def _verdicts(turns: list[dict]) -> dict[str, dict]:
    """coder turn id -> the Verifier turn that judged it (its child with role verifier)."""
    return {t["parent_turn_id"]: t for t in turns
            if t.get("role") == "verifier" and t.get("parent_turn_id")}


def _outcome(turn: dict, verdicts: dict[str, dict]) -> dict:
    """The turn's harness status/speedup: its Verifier turn's when recorded, else its own."""
    v = verdicts.get(turn["turn_id"])
    return v if v is not None and v.get("status") is not None else turn


def _is_failure(outcome: dict) -> bool:
    return outcome.get("status") not in (None, "ok")


def _given_feedback(turn: dict) -> str | None:
    """The feedback the Coder was shown, recorded on the revise turn as ``{"given": ...}``."""
    try:
        fb = json.loads(turn.get("feedback_json") or "null")
    except ValueError:
        return None
    if isinstance(fb, dict) and fb.get("given") is not None:
        return json.dumps(fb["given"])
    return None


def _previous(turn: dict, by_id: dict[str, dict],
              verdicts: dict[str, dict] | None = None) -> tuple[dict | None, str | None]:
    """(the earlier coder turn with code, the Verifier feedback on it) along the parent chain.

    Handles both layouts: revise -> previous coder turn (feedback on that turn's Verifier
    child) and revise -> verifier turn -> previous coder turn.
    """
    feedback = None
    parent = by_id.get(turn.get("parent_turn_id") or "")
    for _ in range(4):  # coder <- verifier <- coder at most; guard against cycles
        if parent is None:
            return None, None
        if parent.get("role") == "verifier":
            feedback = feedback or parent.get("feedback_json") or parent.get("response")
            parent = by_id.get(parent.get("parent_turn_id") or "")
            continue
        if parent.get("role") == "coder" and parent.get("code"):
            v = (verdicts or {}).get(parent["turn_id"])
            feedback = (feedback or _given_feedback(turn)
                        or (v.get("feedback_json") if v else None) or parent.get("feedback_json"))
            return parent, feedback
        return None, None
    return None, None


def split_turns(turns: list[dict], references: dict[str, Reference], templates: dict[str, str],
                opts: SplitOptions) -> tuple[list[dict], SplitReport]:
    """Sample rows (columns of ``mining.schemas.SAMPLES``) from turn rows."""
    by_id = {t["turn_id"]: t for t in turns}
    verdicts = _verdicts(turns)
    tver = template_version(templates)
    rep, out, seen = SplitReport(), [], set()
    for t in turns:
        if t.get("role") != "coder":
            continue
        rep.considered += 1
        code = t.get("code")
        if not code or t.get("malformed"):
            if opts.drop_malformed:
                rep.drop("malformed")
                continue
            code = code or t.get("response") or ""
        if opts.require_modelnew and "class ModelNew" not in code:
            rep.drop("no ModelNew")
            continue
        if len(code.strip()) < opts.min_code_chars:
            rep.drop("too short")
            continue
        outcome = _outcome(t, verdicts)
        if opts.statuses is not None and outcome.get("status") not in opts.statuses:
            rep.drop(f"status {outcome.get('status')}")
            continue
        if _is_failure(outcome) and not opts.keep_failures:
            rep.drop("failure")
            continue
        ref = references.get(t.get("task_id"))
        if ref is None:
            rep.drop("unknown task")
            continue
        prev, feedback = _previous(t, by_id, verdicts)
        if t.get("action") == "draft":   # a new subtask (perhaps on top of earlier code): Skill 1
            prev, feedback = None, None
        skill = 2 if prev is not None else 1
        if skill not in opts.skills:
            rep.drop(f"skill {skill} not selected")
            continue
        chash = code_hash(code)
        phash = code_hash(prev["code"]) if prev is not None else None
        sid = sample_id(skill, ref.hash, phash, chash)
        if sid in seen:
            rep.duplicates += 1
            continue
        seen.add(sid)
        fields: dict[str, Any] = {
            "hardware": opts.hardware or t.get("gpu") or "unknown GPU",
            "reference": ref.source.strip(),
            "subtask": subtask_text(t.get("subtask_json")),
            "subtask_index": t.get("subtask_index") if t.get("subtask_index") is not None else 0,
            "previous_code": prev["code"].strip() if prev else None,
            "feedback": feedback_text(feedback) if prev else None,
        }
        row = {
            "sample_id": sid, "skill": skill, "task_id": t.get("task_id"),
            "trajectory_id": t.get("trajectory_id"), "turn_id": t["turn_id"],
            "parent_turn_id": prev["turn_id"] if prev else t.get("parent_turn_id"),
            "messages_json": json.dumps(render_messages(templates, skill, fields)),
            "response": code, "code": code, "code_hash": chash,
            "reference_hash": ref.hash, "reference_structural_hash": ref.structural_hash,
            "source_status": outcome.get("status"), "source_speedup": outcome.get("speedup"),
            "subtask_index": t.get("subtask_index"), "prev_code_hash": phash,
            "negative": _is_failure(outcome), "contamination": None, "template_version": tver,
        }
        row.update({c: t.get(c) for c in PROVENANCE_COLS})
        row["task_hash"] = row["task_hash"] or ref.hash
        out.append(row)
    return out, rep
