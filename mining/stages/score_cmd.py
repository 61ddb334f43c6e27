"""``python -m mining score``: recompile, re-evaluate and reward every unscored sample.

One ``scores`` row per sample per scorer version; ``score_id`` is a hash of both, so the stage
is idempotent (scored samples are skipped) and resumable (each batch is written as one part as
soon as it finishes). Within a batch every candidate is submitted to the harness at once, so
builds and GPU runs overlap. Needs no duckdb or polars (runs on GPU nodes).
"""

from __future__ import annotations

import concurrent.futures as cf
import datetime as dt
import hashlib
import json
import sys
from typing import Any

from omegaconf import OmegaConf

from mining.errors import UserError
from mining.store import Store
from skills.split import _previous, _verdicts


def _plain(node) -> dict:
    return OmegaConf.to_container(node, resolve=True) if node is not None else {}


def scorer_version(cfg) -> str:
    """``h<harness>-r<reward>-<config hash>`` unless ``store.score.scorer_version`` is set."""
    v = cfg.store.score.scorer_version
    if v and v != "auto":
        return str(v)
    from rewards import config as rcfg
    from rewards.harness import HARNESS_VERSION

    rv = rcfg.load(_plain(cfg.rewards))["version"]
    # settings of speed and isolation (cache folder, worker counts, sandbox) change no verdict:
    # moving the cache or adding workers must not make every stored score stale
    ignored = set(cfg.store.score.get("version_ignores") or [])
    harness = {k: v for k, v in _plain(cfg.harness).items() if k not in ignored}
    blob = json.dumps({"h": harness, "r": _plain(cfg.rewards)}, sort_keys=True)
    return f"h{HARNESS_VERSION}-r{rv}-{hashlib.sha256(blob.encode()).hexdigest()[:8]}"


def score_id(sample_id: str, version: str) -> str:
    return hashlib.sha256(f"{sample_id}|{version}".encode()).hexdigest()[:20]


def _json(text: str | None) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return {"text": text}


def context(sample: dict, turns: dict[str, dict],
            verdicts: dict[str, dict] | None = None) -> tuple[dict | None, dict | None]:
    """(subtask, feedback) for the rubric's compliance check, from the sample's turn."""
    turn = turns.get(sample.get("turn_id") or "")
    if turn is None:
        return None, None
    subtask = _json(turn.get("subtask_json"))
    feedback = None
    if sample["skill"] == 2:
        _, fb = _previous(turn, turns, verdicts)
        feedback = _json(fb)
    return (subtask if isinstance(subtask, dict) else None,
            feedback if isinstance(feedback, dict) else None)


def to_row(sample: dict, version: str, result, record) -> dict:
    res = result.to_dict()
    ev = res.get("evidence") or {}
    row = {
        "score_id": score_id(sample["sample_id"], version), "sample_id": sample["sample_id"],
        "scorer_version": version, "skill": sample["skill"], "task_id": sample["task_id"],
        "status": res["status"], "correct": bool(res["correct"]), "speedup": res["speedup"],
        "speedup_vs_compile": res["speedup_vs_compile"], "runtime_us": res["runtime_us"],
        "ref_runtime_us": res["ref_runtime_us"],
        "ref_compile_runtime_us": res["ref_compile_runtime_us"],
        "result_json": json.dumps({**res, "evidence": ev}, default=str),
        "scored_at": dt.datetime.now(dt.UTC),
        # provenance: the mining run and policy of the sample, the machine that scored it
        "run_id": sample["run_id"], "round": sample["round"], "policy": sample["policy"],
        "task_hash": sample["task_hash"], "gpu": res.get("gpu") or res.get("device"),
        "torch": res.get("torch"), "cuda": res.get("cuda"),
        "harness_version": res.get("harness_version"),
    }
    row.update(record.to_row())
    return row


def _failed(exc: BaseException):
    from rewards.harness import EvalResult

    return EvalResult(status="crashed", error=f"{type(exc).__name__}: {exc}")


def score_batch(ev, batch: list[dict], tasks: dict, turns: dict, version: str, rcfg) -> list[dict]:
    import rewards

    futs = {ev.submit(tasks[s["task_id"]], s["code"]): s for s in batch}
    verdicts = _verdicts(list(turns.values()))
    rows = []
    for fut in cf.as_completed(futs):
        s = futs[fut]
        try:
            result = fut.result()
        except Exception as e:  # a harness failure is a scored failure, not a lost sample
            result = _failed(e)
        subtask, feedback = context(s, turns, verdicts)
        rec = rewards.score(tasks[s["task_id"]].source, s["code"], result, skill=int(s["skill"]),
                            subtask=subtask, feedback=feedback, cfg=rcfg)
        rows.append(to_row(s, version, result, rec))
    return rows


def pending(store: Store, version: str, limit: int | None) -> list[dict]:
    done = store.keys("scores")
    todo = [s for s in store.read("samples").to_pylist()
            if score_id(s["sample_id"], version) not in done and s.get("code")]
    todo.sort(key=lambda s: s["sample_id"])
    return todo[:limit] if limit else todo


def main(cfg, args: list[str]) -> int:
    from mining.scale import open_executor, select, shard_note
    from mining.tasks import load_tasks
    from rewards.harness.config import HarnessConfig

    store, scfg = Store(cfg.store.root), cfg.store.score
    version = scorer_version(cfg)
    todo = select(pending(store, version, None), lambda s: s["sample_id"], cfg)
    todo = todo[:scfg.limit] if scfg.limit else todo
    if not todo:
        print(f"score: nothing to do; every sample{shard_note(cfg)} has a {version} score")
        return 0
    try:
        tasks = {t.id: t for t in load_tasks(cfg.task).tasks}
        hcfg = HarnessConfig.from_mapping(_plain(cfg.harness))
    except (FileNotFoundError, ValueError) as e:
        raise UserError(str(e)) from e
    unknown = sorted({s["task_id"] for s in todo if s["task_id"] not in tasks})
    if unknown:
        print(f"score: skipping samples of tasks not in this task set: {unknown}", file=sys.stderr)
        todo = [s for s in todo if s["task_id"] in tasks]
    turns = {t["turn_id"]: t for t in store.read("turns").to_pylist()}
    rcfg, n, bs = _plain(cfg.rewards), 0, max(1, int(scfg.batch_size))
    with open_executor(cfg, hcfg) as ev:
        for i in range(0, len(todo), bs):
            rows = score_batch(ev, todo[i:i + bs], tasks, turns, version, rcfg)
            by_run: dict[str, list[dict]] = {}
            for r in rows:
                by_run.setdefault(r["run_id"], []).append(r)
            for run_id, part in by_run.items():
                store.write("scores", part, partition=run_id)
            n += len(rows)
            ok = sum(r["correct"] for r in rows)
            print(f"score: {n}/{len(todo)} scored ({ok}/{len(rows)} correct in this batch)",
                  flush=True)
    print(f"score: wrote {n} rows for scorer version {version}")
    return 0
