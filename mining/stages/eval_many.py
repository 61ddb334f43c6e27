"""``python -m mining eval <run dir | <task>/<file>.py tree | file.jsonl> [--force] [overrides]``.

Scores existing generations (a KernelBench run with its eval_results.json, a tree, JSONL) in one
harness session and keeps them in the store, KernelBench's verdicts beside this toolkit's:

1. every program found gets an ``imports`` row (its provenance and the source's verdict, or the
   one-sentence ``error`` that kept it from being evaluated) and, when it can be evaluated, a
   Skill 1 ``samples`` row (prompt rendered as ``split`` does, so ``export`` can train on it);
2. every sample without a score under this scorer version is submitted to the executor at once;
   results are rewarded and written as ``scores`` parts of ``store.ingest.batch_size`` rows.

Resumable: ids are deterministic (run, file, code), parts are atomic, so a rerun adds only what
is missing; ``--force`` retires this scorer version's scores of the source and scores it again.
Needs no duckdb or polars (runs on GPU nodes); the summary comes from pyarrow.
"""

from __future__ import annotations

import concurrent.futures as cf
import datetime as dt
import hashlib
import json
import signal
import sys
import time
from collections import Counter
from pathlib import Path

from mining.errors import UserError
from mining.ingest.resolve import Resolver
from mining.ingest.sources import Candidate, discover
from mining.ingest.verdicts import KINDS, disagreements, kb_columns
from mining.stages.score_cmd import _failed, _plain, score_id, scorer_version, to_row
from mining.store import Store
from skills.split import code_hash


def import_sample_id(run_id: str, c: Candidate) -> str:
    """Deterministic per (run, program key, normalized code): a rerun finds the same ids."""
    chash = code_hash(c.code) if c.code is not None else ""
    return hashlib.sha256(f"import|{run_id}|{c.key}|{chash}".encode()).hexdigest()[:20]


def _run_id(cfg, c: Candidate) -> str:
    return str(cfg.get("run_id") or f"import-{c.run}")


def ingest(cfg, store: Store, cands: list[Candidate], resolve: Resolver) -> list[dict]:
    """Write the imports and samples rows not stored yet; returns one sample dict per program
    that can be evaluated (stored now or before), each with its ``_task``."""
    from mining.stages.split_cmd import load_templates
    from skills.render import render_messages, subtask_text, template_version

    templates = load_templates(cfg.split.get("templates"))
    tver = template_version(templates)
    have_imp, have_smp = store.keys("imports"), store.keys("samples")
    producer_override = cfg.store.ingest.get("producer")
    imports, samples, ready = [], [], []
    now = dt.datetime.now(dt.UTC)
    for c in cands:
        run_id = _run_id(cfg, c)
        task, why = (None, c.error) if c.error else resolve(c)
        sid = import_sample_id(run_id, c)
        producer = producer_override or c.producer
        base = {"sample_id": sid, "run_id": run_id, "round": int(cfg.get("round") or 0),
                "policy": producer, "task_hash": task.hash if task else None}
        if sid not in have_imp:
            imports.append({
                **base, "task_id": task.id if task else None, "source_kind": c.kind,
                "source_path": c.path, "source_key": c.key, "source_run": c.run,
                "producer": producer, "level": c.level, "problem_id": c.problem,
                "sample_index": c.sample, "task_ref": c.task_ref,
                "code_hash": code_hash(c.code) if c.code is not None else None, "error": why,
                "imported_at": now, **kb_columns(c.kb)})
        if why:
            print(f"eval: {c.path}{'' if c.kind != 'jsonl' else ' ' + c.key}: {why}.",
                  file=sys.stderr)
            continue
        fields = {"hardware": cfg.split.get("hardware") or "unknown GPU",
                  "reference": task.source.strip(), "subtask": subtask_text(None),
                  "subtask_index": 0, "previous_code": None, "feedback": None}
        sample = {**base, "skill": 1, "task_id": task.id, "code": c.code,
                  "code_hash": code_hash(c.code), "reference_hash": task.hash,
                  "reference_structural_hash": task.structural_hash,
                  "messages_json": json.dumps(render_messages(templates, 1, fields)),
                  "response": c.code, "template_version": tver}
        if sid not in have_smp:
            samples.append(sample)
        ready.append({**sample, "_task": task})
    # samples before imports: a crash in between leaves samples whose imports row a rerun adds
    for table, rows in (("samples", samples), ("imports", imports)):
        for run_id, part in _by_run(rows).items():
            store.write(table, part, partition=run_id)
    return ready


def _by_run(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r["run_id"], []).append(r)
    return out


def evaluate_all(cfg, store: Store, todo: list[dict], version: str) -> list[dict]:
    """Every sample in ``todo`` submitted at once; scores parts written as results arrive."""
    import rewards
    from mining.scale import open_executor
    from rewards.harness.config import HarnessConfig

    try:
        hcfg = HarnessConfig.from_mapping(_plain(cfg.harness))
    except ValueError as e:
        raise UserError(str(e)) from e
    rcfg, bs = _plain(cfg.rewards), max(1, int(cfg.store.ingest.batch_size))
    written, buf = [], []

    def flush():
        for run_id, part in _by_run(buf).items():
            store.write("scores", part, partition=run_id)
        written.extend(buf)
        buf.clear()

    signal.signal(signal.SIGTERM, _interrupt)  # `timeout`, a scheduler: flush, then stop
    with open_executor(cfg, hcfg) as ev, _progress(len(todo)) as advance:
        futs = {ev.submit(s["_task"], s["code"]): s for s in todo}
        try:
            for fut in cf.as_completed(futs):
                s = futs[fut]
                try:
                    result = fut.result()
                except Exception as e:  # a harness failure is a scored failure, not a lost sample
                    result = _failed(e)
                rec = rewards.score(s["_task"].source, s["code"], result, skill=1, cfg=rcfg)
                buf.append(to_row(s, version, result, rec))
                advance(result.status)
                if len(buf) >= bs:
                    flush()
        finally:  # an interrupt keeps every finished result
            flush()
    return written


def _interrupt(signum, frame):
    raise KeyboardInterrupt


class _progress:
    """A rich progress bar with ETA on stderr (a line per batch when stderr is not a terminal)."""

    def __init__(self, total: int):
        self.total, self.done, self.t0 = total, 0, time.perf_counter()
        self.status: Counter = Counter()

    def __enter__(self):
        from rich import progress as rp
        from rich.console import Console

        console = Console(stderr=True)
        self.live = console.is_terminal
        self.bar = rp.Progress(rp.TextColumn("eval"), rp.BarColumn(), rp.MofNCompleteColumn(),
                               rp.TextColumn("{task.fields[status]}"), rp.TimeElapsedColumn(),
                               rp.TextColumn("ETA"), rp.TimeRemainingColumn(), console=console,
                               disable=not self.live)
        self.bar.__enter__()
        self.task = self.bar.add_task("eval", total=self.total, status="")
        return self.advance

    def advance(self, status: str) -> None:
        self.done += 1
        self.status[status] += 1
        text = " ".join(f"{k}:{v}" for k, v in sorted(self.status.items()))
        self.bar.update(self.task, advance=1, status=text)
        if not self.live and (self.done % 10 == 0 or self.done == self.total):
            el = time.perf_counter() - self.t0
            eta = el / self.done * (self.total - self.done)
            print(f"eval: {self.done}/{self.total} scored ({text}), {el:.0f} s elapsed, "
                  f"ETA {eta:.0f} s", file=sys.stderr, flush=True)

    def __exit__(self, *exc):
        self.bar.__exit__(*exc)


def summary(store: Store, run_ids: set[str], version: str) -> dict:
    """Counts over the stored rows of these runs (pyarrow only: works on GPU nodes)."""
    imp = [r for r in store.read("imports").to_pylist() if r["run_id"] in run_ids]
    sc = {r["sample_id"]: r for r in store.read(
        "scores", columns=["sample_id", "scorer_version", "status", "correct", "reward",
                           "major_hack", "run_id"]).to_pylist()
        if r["run_id"] in run_ids and r["scorer_version"] == version}
    kinds: Counter = Counter()
    for r in imp:
        s = sc.get(r["sample_id"])
        if s:
            kinds.update(disagreements(r["kb_correct"], s["correct"], s["reward"], s["major_hack"]))
    scored = [sc[r["sample_id"]] for r in imp if r["sample_id"] in sc]
    return {
        "runs": sorted(run_ids), "scorer_version": version, "programs": len(imp),
        "not_evaluated": sum(r["error"] is not None for r in imp), "scored": len(scored),
        "status": dict(Counter(s["status"] for s in scored)),
        "correct": sum(bool(s["correct"]) for s in scored),
        "kb_correct": sum(r["kb_correct"] is True for r in imp),
        "with_kb_verdict": sum(r["kb_correct"] is not None and r["sample_id"] in sc for r in imp),
        "disagreements": {k: kinds.get(k, 0) for k in KINDS},
    }


def main(cfg, args: list[str]) -> int:
    force = "--force" in args or bool(cfg.store.ingest.get("force"))
    paths = [a for a in args if a != "--force"]
    if len(paths) != 1:
        raise UserError("eval takes one run directory, tree or JSONL file (or <task> <candidate.py>)")
    try:
        cands, notes = discover(paths[0], cfg.store.ingest.get("run_name"))
    except FileNotFoundError as e:
        raise UserError(str(e)) from e
    for n in notes:
        print(f"eval: {n}", file=sys.stderr)
    if not cands:
        raise UserError(f"{paths[0]}: no programs found (a KernelBench run holds "
                        "level_<L>_problem_<P>_sample_<S>_kernel.py files; a tree <task>/<file>.py)")
    store, version = Store(cfg.store.root), scorer_version(cfg)
    t0 = time.perf_counter()
    ready = ingest(cfg, store, cands, Resolver(cfg.task))
    ids = {score_id(s["sample_id"], version): s for s in ready}
    if force:
        n = store.delete("scores", ids)
        print(f"eval: --force: {n} earlier {version} scores of this source retired")
    done = store.keys("scores")
    todo = [s for sid, s in ids.items() if sid not in done]
    scored_before, limit = len(ready) - len(todo), cfg.store.ingest.get("limit")
    todo = todo[:int(limit)] if limit else todo
    print(f"eval: {len(cands)} programs, {len(ready)} evaluable, {scored_before} already "
          f"scored under {version}, {len(todo)} to score", flush=True)
    if todo:
        evaluate_all(cfg, store, todo, version)
    wall = time.perf_counter() - t0
    out = summary(store, {_run_id(cfg, c) for c in cands}, version)
    out.update(evaluated_now=len(todo), wall_s=round(wall, 1),
               candidates_per_min=round(60 * len(todo) / wall, 2) if todo and wall > 0 else None)
    print(f"eval: {out['scored']} scored ({out['correct']} correct here, {out['kb_correct']} "
          f"correct per KernelBench), {out['not_evaluated']} not evaluated; disagreements "
          + ", ".join(f"{k}={v}" for k, v in out["disagreements"].items()))
    print("summary: " + json.dumps(out, sort_keys=True))
    print("eval: query them with `python -m mining query disagreements`; "
          f"store {Path(cfg.store.root).expanduser()}")
    return 0
