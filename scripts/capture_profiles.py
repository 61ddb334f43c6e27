"""Capture two-level profiles on the GPU machine: two embedded tasks and two CUDA candidates.

    python scripts/capture_profiles.py --out $OUT [--cache /tmp/km-prof-cache] [--dry]

Writes (few files, for $OUT): ``sysprof_events.json`` and ``ncu_raw.json`` (the raw torch.profiler
event tables and ncu CSV: copy both into tests/fixtures/profiles/ to make them the CPU tests'
fixtures) and ``profiles.json`` (summaries, feedback records, timings). Prints the reference
profile of l3_01_mlp, the Coder feedback of each candidate and the time profiling took.
``--dry`` checks the inputs and the configuration without a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.feedback import make_feedback, render_feedback  # noqa: E402
from agents.profile_feedback import render_reference  # noqa: E402
from mining.tasks import load_suite  # noqa: E402
from rewards.harness import HarnessConfig  # noqa: E402

TASKS = ["l3_01_mlp", "l3_07_gpt_block"]
CAND_SRC = ROOT / "tests" / "fixtures" / "replay" / "src" / "cuda_mlp.py"
CANDIDATES = {"cand:mlp_bias_gelu": ("l3_01_mlp", "bias_gelu"), "cand:mlp_slow": ("l3_01_mlp", "slow_bias_gelu")}


def config(cache: str) -> HarnessConfig:
    return HarnessConfig.from_mapping({
        "device": "cuda", "cache_dir": cache, "compile_baseline": False, "timed_calls": 10, "trials": 3,
        "profiling": {"system": {"keep_events": True}, "kernel": {"timeout_s": 90, "min_share": 0.01}}})


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--cache", default="/tmp/km-prof-cache")
    ap.add_argument("--dry", action="store_true")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = config(a.cache)
    tasks = {t.id: t for t in load_suite("level3", ids=TASKS).tasks}
    cands = {k: (tasks[t], CAND_SRC.read_text().replace("BEHAVIOUR", b)) for k, (t, b) in CANDIDATES.items()}
    print(f"tasks {sorted(tasks)}; candidates {sorted(cands)}; kernel level {cfg.profiling['kernel']['enabled']}")
    if a.dry:
        return 0
    from rewards.harness import Evaluator

    events, ncu, record = {}, {}, {"meta": {}, "reference": {}, "candidates": {}}
    t_all = time.perf_counter()
    with Evaluator(cfg) as ev:
        record["meta"] = {"gpu": ev.info.get("gpu"), "torch": ev.info.get("torch"), "cuda": ev.info.get("cuda")}
        futs = {k: ev.submit(t, src) for k, (t, src) in cands.items()}  # builds overlap the references
        for tid, task in tasks.items():
            t0 = time.perf_counter()
            prof = ev.reference_profile(task)
            base = ev._context_future(task).result()["baseline"]
            wall = time.perf_counter() - t0
            name = f"ref:{tid}"
            if base.get("ref_system_events"):
                events[name] = {**base["ref_system_events"], "declared": []}
            kp = prof.get("kernel") or {}
            ncu[name] = {"csv": kp.get("raw_csv", ""), "status": kp.get("status"), "reason": kp.get("reason")}
            record["reference"][tid] = {
                "profile": {k: v for k, v in prof.items() if k != "kernel"},
                "kernel": {k: v for k, v in kp.items() if k != "raw_csv"},
                "planner_text": render_reference(prof), "wall_s_with_baseline": wall,
                "system_profile_s": (prof.get("system") or {}).get("profile_s"), "ncu_s": kp.get("ncu_s")}
        for k, f in futs.items():
            r = f.result().to_dict()
            evd = r["evidence"]
            se = evd.pop("system_events", None)
            if se:
                events[k] = {**se, "declared": evd.get("declared_kernels", [])}
            kp = evd.get("kernel_profile") or {}
            if kp.get("raw_csv"):  # a candidate that failed before profiling has no ncu table to record
                ncu[k] = {"csv": kp.pop("raw_csv"), "status": kp.get("status"), "reason": kp.get("reason")}
            fb = make_feedback(r)
            record["candidates"][k] = {"status": r["status"], "error": r["error"], "speedup": r["speedup"],
                                       "runtime_us": r["runtime_us"], "feedback": fb, "text": render_feedback(fb),
                                       "system_profile_s": (evd.get("system_profile") or {}).get("profile_s"),
                                       "ncu_s": kp.get("ncu_s"), "build_s": r["build_s"]}
    record["meta"]["total_s"] = time.perf_counter() - t_all
    meta = {**record["meta"], "source": "captured by scripts/capture_profiles.py"}
    (out / "sysprof_events.json").write_text(json.dumps({"meta": meta, "cases": events}))
    (out / "ncu_raw.json").write_text(json.dumps({"meta": meta, "cases": ncu}, indent=1))
    (out / "profiles.json").write_text(json.dumps(record, indent=1, default=str))
    ref = record["reference"]["l3_01_mlp"]
    print("\n=== reference profile, l3_01_mlp (for the Planner) ===\n" + (ref["planner_text"] or "none"))
    print(f"profiling time: system {ref['system_profile_s']} s, ncu {ref['ncu_s']} s "
          f"(reference context incl. baseline {ref['wall_s_with_baseline']:.1f} s)")
    for k, c in record["candidates"].items():
        print(f"\n=== {k}: {c['status']} {c['error'] or ''} speedup {c['speedup']} build {c['build_s']} s; "
              f"profiling: system {c['system_profile_s']} s, ncu {c['ncu_s']} s ===\n{c['text']}")
    names = [f"ref:{t}" for t in record["reference"]] + list(cands)
    print(f"\nncu status: { {k: (ncu.get(k) or {}).get('status') for k in names} }; "
          f"total {record['meta']['total_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
