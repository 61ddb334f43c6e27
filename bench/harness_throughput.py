"""Harness throughput on real-style candidates vs KernelBench's batch recipe, in one run.

    python bench/harness_throughput.py --out $OUT/throughput.txt          # H200, < 540 s
    python bench/harness_throughput.py --cv --configs none --out cv.txt     # timing quality only
    python bench/harness_throughput.py --real bench/real_code/data/technoabsurdist__KernelBench/runs/gemini_level3_run \
        --beside $OUT/throughput.json --out $OUT/throughput_real.txt        # real programs
    python bench/harness_throughput.py --dry                                # CPU: every code path, 2 builds

Candidates (bench/throughput_candidates.py) are written like real Level 3 solutions: the whole
model, some ops on custom kernels in a heavy torch/extension.h source, ``load_inline`` at module
level, in ``__init__`` or in a helper inside ``try:``, ``torch.jit.trace`` / ``torch.compile`` in
``__init__``. Two configurations (``--configs``): one candidate on each of ``--tasks`` tasks
(default 24) and ``--per-task`` (8) candidates on each of ``--tasks-multi`` (3) tasks. Each
configuration is evaluated by the harness (fresh cache, all submitted at once). KernelBench's batch
recipe (bench/kernelbench_batch.py: parallel pre-compile, serial in-process evaluation, the
harness's trials / warm-ups / timed calls / L2 flush) then runs on ``--kb-n`` (5) candidates drawn
across both configurations, one of each building style: it shares nothing between candidates (no
reference reuse, no build of one serves another), so its rate per candidate is the same for both
configurations, and its serial builds of ``__init__``-time extensions make a full run of it the
longest part of the bench; both of its stages scale with the number of candidates. ``--warm`` runs
each synthetic configuration a second time on the same candidates in a new evaluator with only
the references' baselines and the shared PCHs kept from the first run (builds and reference
outputs start fresh): a later run on the same machine. ``--steady`` submits, once a configuration's
batch has finished, a second batch of other candidates for the same tasks (another salt: every
build fresh) to the same evaluator: what each step of a training run sees, since its reward keeps
one evaluator for the whole run (train/skill_reward.py), with workers up, references prepared and
PCHs made. KernelBench's batch recipe reads precomputed reference timings the same way
(``--kb-no-ref-timing`` runs it so).

Printed per configuration and evaluator: candidates, correct, wall, candidates per minute, the
ratio harness / KernelBench, median build time of fresh builds, GPU-lock held time per candidate
(``phases_s.gpu_held`` where the harness reports it, else ``slot_held``; KernelBench holds the
GPU for its whole serial evaluation) and the GPU's busy fraction while candidates are queued
(from built-and-ready to finished): nvidia-smi's utilization sampled in a thread, and the
GPU-lock held time over that window; and each run's host CPU busy fraction (/proc/stat), its CPU
seconds by process role (bench/cpu_roles.py: compilers, each kind of worker, the bench) and GPU
memory peak (nvidia-smi), to tell a CPU-bound stage from a GPU-bound one and whose CPU it is. ``--cv`` evaluates one
candidate ``--cv-reps`` (8) times, each in a fresh worker, and prints the runtime's coefficient of
variation. ``--real DIR`` runs the same comparison on a KernelBench run directory (programs
mapped to ``--real-refs``' level3 references by problem number); ``--beside FILE`` prints the figures of an earlier run's JSON next
to this one's. Everything stops at ``--deadline`` seconds and reports what finished. ``--out``
gets the table; ``<out>.json`` the figures and per-candidate records they come from.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import itertools
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from bench import cpu_roles  # noqa: E402
from bench import kernelbench_batch as kbb  # noqa: E402
from bench import throughput_candidates as tc  # noqa: E402
from bench.real_code import deep_merge, harness_config, parse_overrides  # noqa: E402
from rewards.harness.reference import override_constants  # noqa: E402

TARGETS = {"ratio": 3.0, "cand_per_min": 20.0, "busy": 0.60, "cv": 0.02}


class Deadline(Exception):
    pass


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- GPU sampling


class GpuSampler:
    """nvidia-smi's utilization.gpu and memory.used every ``period_ms`` in a thread, and the
    host's CPU busy fraction (/proc/stat, Linux) at the same period: whether a slow stage waits
    on the GPU, on its memory or on the 16 cores that builds, loads and references share."""

    def __init__(self, gpu: str = "0", period_ms: int = 100):
        self.samples: list[tuple[float, float]] = []  # (perf_counter, utilization %)
        self.mem: list[tuple[float, float]] = []  # (perf_counter, MiB used)
        self.cpu: list[tuple[float, float]] = []  # (perf_counter, busy 0-1 since the last sample)
        self.proc = None
        self._stop = threading.Event()
        self.t_start = time.perf_counter()  # the first CPU sample covers the time from here
        exe = shutil.which("nvidia-smi")
        if exe and torch.cuda.is_available():
            self.proc = subprocess.Popen([exe, "-i", gpu, "--query-gpu=utilization.gpu,memory.used",
                                          "--format=csv,noheader,nounits", "-lms", str(period_ms)],
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            threading.Thread(target=self._read, daemon=True).start()
        if os.path.exists("/proc/stat"):
            threading.Thread(target=self._read_cpu, args=(period_ms / 1000,), daemon=True).start()
        self.roles = cpu_roles.RoleSampler()  # whose CPU it is (compilers, workers by kind, the bench)

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                util, mem = (float(x) for x in line.strip().split(","))
            except ValueError:
                continue
            t = time.perf_counter()
            self.samples.append((t, util))
            self.mem.append((t, mem))

    @staticmethod
    def _jiffies() -> tuple[int, int]:
        """(busy, total) jiffies of all CPUs: idle and iowait are not busy."""
        with open("/proc/stat") as f:
            xs = [int(x) for x in f.readline().split()[1:]]
        return sum(xs) - xs[3] - (xs[4] if len(xs) > 4 else 0), sum(xs)

    def _read_cpu(self, period: float) -> None:
        last = self._jiffies()
        while not self._stop.wait(period):
            now = self._jiffies()
            if now[1] > last[1]:
                self.cpu.append((time.perf_counter(), (now[0] - last[0]) / (now[1] - last[1])))
            last = now

    def stop(self) -> None:
        self._stop.set()
        self.roles.stop()
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)

    @staticmethod
    def _within(xs: list[tuple[float, float]], windows: list[tuple[float, float]]) -> list[float]:
        return [v for t, v in xs if any(a <= t <= b for a, b in windows)]

    def mean_within(self, windows: list[tuple[float, float]]) -> float | None:
        """Mean utilization (0-1) of the samples inside ``windows``; None without samples."""
        xs = self._within(self.samples, windows)
        return statistics.mean(xs) / 100 if xs else None

    def host_within(self, windows: list[tuple[float, float]]) -> dict:
        """Host CPU busy (mean, and the share of samples at least 90% busy) and the GPU memory
        peak (GiB) inside ``windows``; None where nothing was sampled."""
        # a CPU sample at t is the busy fraction over (previous sample, t]: those that overlap count,
        # so a window shorter than the period still gets the sample that spans it
        xs = list(self.cpu)  # the thread appends meanwhile
        spans = zip([self.t_start] + [t for t, _ in xs[:-1]], xs, strict=True)
        cpu = [v for a, (b, v) in spans if any(a < d and b >= c for c, d in windows)]
        mem = self._within(self.mem, windows)
        return {"cpu_roles_s": self.roles.within(windows),
                "cpu_busy": statistics.mean(cpu) if cpu else None,
                "cpu_saturated": sum(x >= 0.9 for x in cpu) / len(cpu) if cpu else None,
                "gpu_mem_peak_gib": max(mem) / 1024 if mem else None}


def union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Merged, sorted intervals."""
    out: list[list[float]] = []
    for a, b in sorted(i for i in intervals if i[1] > i[0]):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def covered(intervals: list[tuple[float, float]], windows: list[tuple[float, float]]) -> float:
    """Seconds of ``windows`` (merged) covered by ``intervals`` (merged)."""
    total = 0.0
    for a, b in union(intervals):
        for c, d in windows:
            total += max(0.0, min(b, d) - max(a, c))
    return total


def length(windows: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in windows)


# ----------------------------------------------------------------------------- the harness side


def run_harness(name: str, work: list, cfg: dict, deadline: float, sampler: GpuSampler, group: str,
                then: tuple[str, list, Callable[[], float]] | None = None) -> list[dict]:
    """Every (task, source, meta) of ``work`` submitted at once to a fresh Evaluator; stops at
    ``deadline`` (perf_counter). ``then``: (name, work, deadline function) of a second batch
    submitted to the same evaluator once the first has finished (``--steady``). Returns a row per
    batch: the figures and one record per finished candidate."""
    from rewards.harness import Evaluator

    t0 = time.perf_counter()
    rows: list[dict] = []
    ev = Evaluator(cfg)
    batches = [(name, work, lambda: deadline)] + ([then] if then else [])
    try:
        with ev:
            log(f"[{name} {time.perf_counter() - t0:6.1f}s] harness up ({ev.startup_s}): {ev.n_build} concurrent "
                f"builds; {len(work)} candidates submitted")
            for bname, bwork, bdeadline in batches:
                tb = t0 if not rows else time.perf_counter()  # the first batch pays the evaluator's start
                rows.append(_batch(ev, bname, bwork, tb, bdeadline(), sampler, group))
                if rows[-1]["cut"]:
                    raise Deadline  # the evaluator kills what is still running
    except Deadline:
        for _, _, bdeadline in batches[len(rows):]:
            bdeadline()  # its share of the deadline goes to the stages after it
    return rows


def _batch(ev, name: str, work: list, t0: float, deadline: float, sampler: GpuSampler, group: str) -> dict:
    """One batch on a running evaluator, from ``t0`` to its last candidate (or the deadline)."""
    recs: list[dict] = []
    n_timings = len(ev.task_timings)  # references this batch prepares (a steady batch: few or none)
    subs = {}
    for task, src, meta in work:
        subs[ev.submit(task, src)] = (task, meta, time.perf_counter())
    pending, cut = set(subs), False
    while pending:
        left = deadline - time.perf_counter()
        if left <= 0:
            cut = True
            log(f"[{name}] deadline: {len(recs)} of {len(work)} finished; the rest is cancelled")
            break
        done, pending = cf.wait(pending, timeout=min(left, 5.0), return_when=cf.FIRST_COMPLETED)
        for f in done:
            task, meta, t_sub = subs[f]
            recs.append(_record(f, task, meta, t_sub, time.perf_counter()))
            r = recs[-1]
            log(f"[{name} {time.perf_counter() - t0:6.1f}s] {len(recs)}/{len(work)} {task.id} {meta}: "
                f"{r['status']} build_s={r['build_s']} held={r['gpu_held_s']} runtime_us={r['runtime_us']}"
                + (f" error={r['error'][:200]}" if r.get("error") else "")
                + (f" cache_tampered={r['cache_tampered']}" if r.get("cache_tampered") else ""))
    wall = time.perf_counter() - t0
    held_iv = [(e["start"], e["end"]) for e in getattr(ev, "timeline", []) or []
               if e.get("kind") == "gpu" and e["start"] >= t0]
    timings = list(ev.task_timings)[n_timings:]
    return {**summarize_harness(name, recs, len(work), wall, cut, [] if cut else held_iv, timings, sampler, t0),
            "group": group, "pch": dict(ev.pch), "host_peak_gb": round(ev.host.peak / 1e9, 2),
            "startup_s": dict(ev.startup_s)}


def _record(f: cf.Future, task, meta: dict, t_sub: float, t_done: float) -> dict:
    try:
        r = f.result()
    except Exception as e:  # a harness failure: the candidate counts, as not correct
        return {"task": task.id, **meta, "status": "harness_error", "correct": False, "build_s": None,
                "cache_hit": False, "runtime_us": None, "gpu_held_s": 0.0, "phases_s": {}, "error": str(e)[:300],
                "t_submit": t_sub, "t_done": t_done}
    ph = r.evidence.get("phases_s", {})
    held = ph.get("gpu_held", ph.get("slot_held", 0.0))
    ready = t_sub + sum(ph.get(k, 0.0) for k in ("queue", "build", "ref_wait"))
    return {"task": task.id, **meta, "status": r.status, "correct": r.correct, "build_s": r.build_s,
            "cache_hit": r.cache_hit, "runtime_us": r.runtime_us, "gpu_held_s": held,
            "timed_calls": r.evidence.get("timed_calls"),
            "held_key": "gpu_held" if "gpu_held" in ph else "slot_held", "phases_s": ph,
            "slot_builds": r.evidence.get("slot_builds"), "fast_build": r.evidence.get("fast_build") or [],
            "compiler_spare": r.evidence.get("compiler_spare"), "compiler_import": r.evidence.get("compiler_import"),
            "profiled": "system_profile" in r.evidence, "profiling_error": r.evidence.get("profiling_error"),
            "oom_retry": r.evidence.get("oom_retry"), "worker_cpu_s": r.evidence.get("worker_cpu_s") or {},
            "cache_tampered": r.evidence.get("cache_tampered") or [],
            "error": r.error, "t_submit": t_sub,
            "t_ready": ready if r.compiled else None, "t_done": t_done}


def summarize_harness(name, recs, n, wall, cut, held_iv, timings, sampler, t0: float | None = None) -> dict:
    builds = [r["build_s"] for r in recs if r["build_s"] is not None and not r["cache_hit"]]
    queued = union([(r["t_ready"], r["t_done"]) for r in recs if r.get("t_ready") is not None])
    # GPU-lock sections: the evaluator's timeline when it keeps one (references' timing too),
    # else each candidate's held time placed at the end of its queued interval
    if not held_iv:
        held_iv = [(r["t_done"] - r["gpu_held_s"], r["t_done"]) for r in recs if r.get("t_ready") is not None]
    qlen = length(queued)
    held = union(held_iv)
    return {**lock_bounds(recs, held, sampler, t0), "config": name, "evaluator": "harness", "n": n, "done": len(recs), "cut": cut,
            "correct": sum(bool(r["correct"]) for r in recs), "wall_s": wall,
            "cand_per_min": len(recs) / wall * 60 if wall > 0 else 0.0,
            "build_median_s": statistics.median(builds) if builds else None, "builds": len(builds),
            "gpu_held_per_cand_s": statistics.median([r["gpu_held_s"] for r in recs]) if recs else None,
            "held_key": sorted({r.get("held_key") for r in recs if r.get("held_key")}),
            "queued_s": qlen, "busy_lock": covered(held_iv, queued) / qlen if qlen else None,
            "busy_util": sampler.mean_within(queued), "task_timings": timings,
            **(sampler.host_within([(t0, t0 + wall)]) if t0 is not None else {}),
            "statuses": _count(r["status"] for r in recs), "records": recs}


def lock_bounds(recs: list[dict], held: list[tuple[float, float]], sampler: GpuSampler, t0: float | None) -> dict:
    """What the exclusive sections alone allow: ``util_in_lock``, the GPU's utilization while
    one candidate is timed or profiled (the most ``busy_util`` can reach while timed sections may
    not overlap), and ``lock_bound_per_min``, the rate had the lock been held without a gap from
    the first candidate's readiness to the end: first ready, then every second held after it
    (never below the measured rate; references timed before it do not count)."""
    ready = [r["t_ready"] for r in recs if r.get("t_ready") is not None]
    if not ready or t0 is None:
        return {"util_in_lock": sampler.mean_within(held) if held else None, "lock_held_s": length(held),
                "lock_bound_per_min": None}
    after = covered(held, [(min(ready), float("inf"))]) if held else 0.0
    span = min(ready) - t0 + after
    return {"util_in_lock": sampler.mean_within(held) if held else None, "lock_held_s": after,
            "lock_bound_per_min": len(recs) * 60 / span if span > 0 else None}


def _count(xs) -> dict:
    out: dict = {}
    for x in xs:
        out[x] = out.get(x, 0) + 1
    return out


# ----------------------------------------------------------------------------- KernelBench's side


def run_kb(name: str, work: list, hcfg, device: str, workers: int, deadline: float, sampler: GpuSampler,
           build_root: str, shared_build_dir: bool, isolate: bool, time_reference: bool,
           calls_by_task: dict | None = None) -> dict:
    """KernelBench's batch recipe on ``work`` (the same candidates, a fresh salt: no shared builds),
    with ``calls_by_task``: {task id: the timed calls the harness made there}."""
    env = {"MAX_JOBS": str(hcfg.build_max_jobs)}
    if device == "cuda":
        cap = torch.cuda.get_device_capability(0)
        env["TORCH_CUDA_ARCH_LIST"] = f"{cap[0]}.{cap[1]}"  # KernelBench's set_gpu_arch: one arch
    pairs = [(override_constants(task.source, hcfg.overrides_for(task, device)), src) for task, src, _ in work]
    # the same timed calls as the harness made on each task (harness.timing_budget_ms), else timed_calls
    calls = [(calls_by_task or {}).get(task.id) or hcfg.timed_calls for task, _, _ in work]
    t_run = time.perf_counter()  # host figures over the whole recipe: its pre-compile uses the CPU most
    rec = kbb.run(pairs, build_root, device, workers, env, trials=hcfg.trials, warmup=hcfg.warmup,
                  calls=calls, l2_flush_mb=hcfg.l2_flush_mb, seed=hcfg.seed, time_reference=time_reference,
                  isolate=isolate, shared_build_dir=shared_build_dir, deadline=deadline, log=log)
    t_end = time.perf_counter()
    ev = rec["eval"]
    builds = [p["build_s"] for p in rec["pre"] if p and p["built"]]
    window = union(rec["eval_marks"])
    return {"config": name, "evaluator": "kernelbench-batch", "n": rec["n"], "done": rec["n_eval"],
            "cut": rec["n_eval"] < rec["n"], "correct": sum(bool(e["correct"]) for e in ev),
            "wall_s": rec["pre_wall_s"] + rec["eval_wall_s"], "pre_wall_s": rec["pre_wall_s"],
            "eval_wall_s": rec["eval_wall_s"], "cand_per_min": kbb.rate_per_min(rec),
            "build_median_s": statistics.median(builds) if builds else None, "builds": len(builds),
            "load_median_s": statistics.median([e["phases_s"].get("load", 0.0) + e["phases_s"].get("construct", 0.0)
                                                for e in ev]) if ev else None,
            "gpu_held_per_cand_s": statistics.median([e["phases_s"]["total"] for e in ev]) if ev else None,
            "held_key": ["in-process evaluation"], "queued_s": length(window),
            "busy_lock": 1.0 if ev else None, "busy_util": sampler.mean_within(window),
            **sampler.host_within([(t_run, t_end)]),
            "statuses": _count("ok" if e["correct"] else ("compile_error" if not e["compiled"] else "failed") for e in ev),
            "records": [{k: v for k, v in e.items() if k not in ("runtime_all_ms", "traceback")} for e in ev],
            "pre": rec["pre"], "work": [{"task": t.id, **m} for t, _, m in work],
            "time_reference": time_reference, "isolate": isolate}


# ----------------------------------------------------------------------------- work lists


def synthetic_configs(a, salt: str) -> list[tuple[str, list]]:
    device = "cpu" if a.dry else "cuda"
    backend = "eager" if a.dry else "inductor"  # inductor on CPU needs a C++ build per candidate
    all_tasks = tc.tasks()
    out = []
    for per in a.configs:
        ts = all_tasks[:a.tasks] if per == 1 else all_tasks[:a.tasks_multi]
        cands = tc.candidates(ts, per, salt if a.dry else f"{salt}p{per}", device, shared_ext=a.dry,
                              compile_backend=backend, small=a.dry)
        out.append((f"{per}/task", [(c.task, c.source, {"v": c.variant, "style": c.style}) for c in cands]))
    return out


def real_work(run_dir: Path, refs: Path, limit: int | None) -> tuple[list, list[str]]:
    """(task, program, meta) for every program of a KernelBench run with a level-3 reference."""
    from bench.real_code import as_model_new
    from mining.ingest.sources import discover
    from mining.tasks import load_dir

    cands, notes = discover(run_dir)
    by_num = {int(t.id.split("_")[1]): t for t in load_dir(refs, level=3, import_check=False).tasks}
    work = []
    for c in cands:
        t = by_num.get(c.problem or -1)
        if c.code is None or t is None:
            notes.append(f"{c.key}: {c.error or 'no level3 reference for problem ' + str(c.problem)}")
            continue
        work.append((t, as_model_new(c.code), {"program": c.key}))
    return work[:limit] if limit else work, notes


def kb_sample(works: list[list], n: int) -> list:
    """``n`` candidates for the baseline, drawn across the configurations with the building styles
    in turn (module, __init__, helper, ...), so that a prefix cut by the deadline is a mix too."""
    queues: dict = {}
    for tup in itertools.zip_longest(*works):
        for c in tup:
            if c is not None:
                queues.setdefault(c[2].get("style"), []).append(c)
    out: list = []
    while len(out) < n and any(queues.values()):
        for q in queues.values():
            if q and len(out) < n:
                out.append(q.pop(0))
    return out


def kb_salted(work: list, salt: str) -> list:
    """The baseline's copies: load_inline names get a suffix, so neither side reuses the other's builds."""
    import re

    return [(t, re.sub(r"""(name\s*=\s*)(["'])(\w+)\2""", rf"\1\2\3_kb{salt}\2", src), m) for t, src, m in work]


# ----------------------------------------------------------------------------- report


def fmt(x, spec: str, none: str = "-") -> str:
    return none if x is None else format(x, spec)


def table(rows: list[dict]) -> list[str]:
    w = max([10] + [len(r["config"]) + 2 for r in rows])
    head = (f"{'config':<{w}}{'evaluator':<19}{'cands':>6}{'done':>6}{'correct':>8}{'wall s':>8}{'cand/min':>9}"
            f"{'build med s':>12}{'gpu held/cand s':>16}{'busy util':>10}{'busy lock':>10}")
    out = [head]
    for r in rows:
        out.append(f"{r['config']:<{w}}{r['evaluator']:<19}{r['n']:>6}{r['done']:>6}{r['correct']:>8}{r['wall_s']:>8.1f}"
                   f"{r['cand_per_min']:>9.2f}{fmt(r['build_median_s'], '.1f'):>12}{fmt(r['gpu_held_per_cand_s'], '.2f'):>16}"
                   f"{fmt(r['busy_util'], '.0%'):>10}{fmt(r['busy_lock'], '.0%'):>10}"
                   + ("  (cut at deadline)" if r["cut"] else ""))
    return out


def ratios(rows: list[dict]) -> list[dict]:
    out = []
    for h in (r for r in rows if r["evaluator"] == "harness"):
        k = next((r for r in rows if r["evaluator"] == "kernelbench-batch" and r["config"] == h["group"]), None)
        if k and k["cand_per_min"]:
            out.append({"config": h["config"], "baseline": k["config"], "ratio": h["cand_per_min"] / k["cand_per_min"],
                        "harness": h["cand_per_min"], "kb": k["cand_per_min"], "busy_util": h["busy_util"],
                        "busy_lock": h["busy_lock"]})
    return out


def verdicts(rs: list[dict], cv: dict | None) -> list[str]:
    out = []
    for r in rs:
        busy = r["busy_util"] if r["busy_util"] is not None else r["busy_lock"]
        what = "real programs" if r["baseline"] == "real" else "real-style set"
        out.append(f"  {r['config']:<10} ratio {r['ratio']:.2f}x (target >= {TARGETS['ratio']}x: "
                   f"{'met' if r['ratio'] >= TARGETS['ratio'] else 'NOT met'}); harness {r['harness']:.1f} cand/min on the "
                   f"{what} (target >= {TARGETS['cand_per_min']:.0f}: {'met' if r['harness'] >= TARGETS['cand_per_min'] else 'NOT met'}); "
                   f"GPU busy while queued {fmt(busy, '.0%')} (target >= {TARGETS['busy']:.0%}: "
                   f"{'met' if busy is not None and busy >= TARGETS['busy'] else 'NOT met'})")
    if cv:
        out.append(f"  runtime CV {cv['cv']:.3%} over {cv['n']} fresh evaluations (target <= {TARGETS['cv']:.0%}: "
                   f"{'met' if cv['cv'] <= TARGETS['cv'] else 'NOT met'})")
    return out


def _pch_uses(recs: list[dict]) -> str:
    """Fresh builds whose binding unit used a shared PCH, and which (light: the light headers')."""
    fresh = [r.get("fast_build") or [] for r in recs if not r["cache_hit"]]
    light, full = sum("light_pch" in f for f in fresh), sum("pch" in f for f in fresh)
    return f"{light + full} of {len(fresh)} (light {light}, torch/extension.h {full})"


def _compiler_spares(recs: list[dict]) -> str:
    """Candidates that call torch.compile (harness.compiler_spares): how many loaded in a worker that
    had imported the compiler, and what that import took there."""
    want = [r for r in recs if r.get("compiler_spare") is not None]
    imp = [r["compiler_import"] for r in want if (r.get("compiler_import") or {}).get("s") is not None]
    return (f"{sum(bool(r['compiler_spare']) for r in want)} of {len(want)}"
            + (f" (import in the spare: median {statistics.median(i['s'] for i in imp):.1f} s, "
               f"{statistics.median(i['cpu_s'] for i in imp):.1f} CPU-s)" if imp else ""))


def phase_lines(rows: list[dict]) -> list[str]:
    out = []
    for r in rows:
        if r["evaluator"] != "harness" or not r["records"]:
            continue
        keys: list[str] = []
        for rec in r["records"]:
            keys += [k for k in rec["phases_s"] if k not in keys]
        cells = []
        for k in keys:
            xs = [rec["phases_s"][k] for rec in r["records"] if k in rec["phases_s"]]
            cells.append(f"{k} {statistics.median(xs):.2f}/{max(xs):.2f}")
        out.append(f"  {r['config']} harness phases, median/max s: " + ", ".join(cells))
        out.append(f"  {r['config']} bounds of the exclusive sections: GPU lock held {r.get('lock_held_s', 0.0):.1f} s "
                   f"after the first candidate was ready; utilization while held {fmt(r.get('util_in_lock'), '.0%')} (the most 'busy util' reaches "
                   f"with timed sections alone on the GPU); {fmt(r.get('lock_bound_per_min'), '.1f')} cand/min had the "
                   "lock been held without a gap from the first candidate ready to the last done; candidates' "
                   "sections summed, s: " + ", ".join(f"{k} {sum(rec['phases_s'].get(k, 0.0) for rec in r['records']):.1f}"
                                                      for k in ("time", "profile", "judge", "ncu")))
        ok = [rec for rec in r["records"] if rec["status"] == "ok"]
        perr = [rec["profiling_error"] for rec in ok if rec.get("profiling_error")]
        out.append(f"  {r['config']} profiles: {sum(bool(rec.get('profiled')) for rec in ok)} of {len(ok)} ok candidates "
                   f"profiled; profiling errors {len(perr)}" + (f" (first: {perr[0][:200]})" if perr else ""))
        out.append(f"  {r['config']} statuses: harness {r['statuses']}; slot builds (built inside the GPU slot): "
                   f"{sum(rec.get('slot_builds') or 0 for rec in r['records'])}; fresh builds whose binding unit "
                   f"used a shared PCH: {_pch_uses(r['records'])}"
                   f" of {sum(not rec['cache_hit'] for rec in r['records'])}; torch.compile programs loaded in a "
                   f"compiler spare: {_compiler_spares(r['records'])}")
        cpu: dict[str, float] = {}
        for rec in r["records"]:
            for k, v in (rec.get("worker_cpu_s") or {}).items():
                cpu[k] = cpu.get(k, 0.0) + v
        if cpu:
            out.append(f"  {r['config']} candidates' workers, CPU-s by phase (summed; start: a worker's start-up): "
                       + ", ".join(f"{k} {v:.0f}" for k, v in sorted(cpu.items(), key=lambda kv: -kv[1])))
        for rec in r["records"]:
            if rec.get("oom_retry"):  # out of memory beside others: judged once more alone (oom.py)
                o = rec["oom_retry"]
                out.append(f"  {r['config']} out-of-memory retry: {rec['task']} -> {rec['status']}; device free "
                           f"{o.get('free_gib_before')} GiB, {o.get('free_gib_shed')} GiB after the parent shed its cache")
        n = sorted(rec["timed_calls"] for rec in r["records"] if rec.get("timed_calls"))
        if n:
            out.append(f"  {r['config']} timed calls per measurement (harness.timing_budget_ms): median "
                       f"{statistics.median(n):.0f}, range {n[0]}-{n[-1]}, over {len(n)} timed candidates")
        if r["task_timings"]:
            prep = [t.get("prepare_s", 0.0) for t in r["task_timings"]]
            tts = r["task_timings"]
            inner = {k: statistics.median(t.get("prepare_phases", {}).get(k, 0.0) for t in tts)
                     for k in sorted({k for t in tts for k in t.get("prepare_phases", {})})}
            out.append(f"  {r['config']} references: {len(prep)} prepared, median prepare {statistics.median(prep):.1f} s "
                       f"(in the worker {statistics.median(t.get('prepare_worker_s', 0.0) for t in tts):.1f} s: "
                       + ", ".join(f"{k} {v:.2f}" for k, v in inner.items()) + ")")
            around = [k for k in ("ref_queue_s", "start_s", "host_wait_s", "compile_s", "baseline_s") if any(k in t for t in tts)]
            out.append(f"  {r['config']} references, median/max s around prepare: " + ", ".join(
                f"{k} {statistics.median(t.get(k, 0.0) for t in tts):.2f}/{max(t.get(k, 0.0) for t in tts):.2f}" for k in around)
                + (f"; host memory admitted at most {r['host_peak_gb']:.2f} GB at once" if r.get("host_peak_gb") is not None else ""))
    return out


def host_lines(rows: list[dict]) -> list[str]:
    """What else each run waited on: the host's CPU (builds, loads, references and the parent
    share its cores) and the GPU's memory (``harness.resident`` candidates loaded at once)."""
    out = []
    for r in rows:
        if r.get("cpu_busy") is None and r.get("gpu_mem_peak_gib") is None:
            continue
        out.append(f"  {r['config']} {r['evaluator']} host: CPU busy {fmt(r.get('cpu_busy'), '.0%')} (mean over the run), "
                   f"{fmt(r.get('cpu_saturated'), '.0%')} of the time at least 90% busy; GPU memory peak "
                   f"{fmt(r.get('gpu_mem_peak_gib'), '.1f')} GiB")
        roles = r.get("cpu_roles_s") or {}
        total = sum(roles.values())
        if total > 0:  # bench/cpu_roles.py: who used it
            out.append(f"  {r['config']} {r['evaluator']} host CPU by role, CPU-s ({total / (r.get('done') or 1):.1f} per "
                       "candidate): " + ", ".join(f"{k} {v:.0f} ({v / total:.0%})" for k, v in roles.items() if v >= 0.5))
    return out


# ----------------------------------------------------------------------------- CV


def run_cv(task, src: str, cfg: dict, reps: int, deadline: float) -> dict | None:
    """One candidate evaluated ``reps`` times, one after another, each in a fresh worker."""
    from rewards.harness import Evaluator

    rts = []
    with Evaluator(cfg) as ev:
        for i in range(reps):
            if time.perf_counter() > deadline:
                log(f"[cv] deadline after {i} evaluations")
                break
            r = ev.submit(task, src).result()
            log(f"[cv] {i + 1}/{reps}: {r.status} runtime_us={r.runtime_us}" + (f" error={r.error}" if r.error else ""))
            if r.runtime_us:
                rts.append(r.runtime_us)
    if len(rts) < 2:
        return None
    return {"task": task.id, "n": len(rts), "runtimes_us": rts, "cv": statistics.pstdev(rts) / statistics.mean(rts)}


# ----------------------------------------------------------------------------- main


def _interrupt(signum, frame):
    raise KeyboardInterrupt  # a timeout's SIGTERM: leave through the evaluators' cleanup


def parse(argv: list[str] | None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("overrides", nargs="*", help="harness key=value (dotted; YAML values)")
    ap.add_argument("--out", type=Path, help="write the table here (and the figures to <out>.json)")
    ap.add_argument("--configs", default=None, help="candidates per task, comma-separated (default 1,8; dry 1,2); none: skip")
    ap.add_argument("--tasks", type=int, default=None, help="tasks of the 1-per-task configuration (default 24; dry 2)")
    ap.add_argument("--tasks-multi", type=int, default=None, help="tasks of the N-per-task configuration (default 3; dry 1)")
    ap.add_argument("--per-task", type=int, default=None, help="shortcut: --configs 1,N")
    ap.add_argument("--kb-n", type=int, default=None,
                    help="KernelBench's sample: candidates drawn across the configurations (default 5; dry 2)")
    ap.add_argument("--kb-isolate", action="store_true", help="KernelBench: a spawned process per candidate, as its script")
    ap.add_argument("--kb-no-ref-timing", action="store_true", help="KernelBench: skip the per-candidate reference timing")
    ap.add_argument("--deadline", type=float, default=None, help="seconds for the whole run (default 520; dry 1800)")
    ap.add_argument("--compare", nargs="+", action="append", metavar="KEY=VALUE", default=None,
                    help="also run each synthetic configuration with these harness overrides (after it, in a cache "
                         "of its own) and print the cost of the setting, e.g. --compare sandbox=off; given again, "
                         "one more row per --compare (the shared PCHs made once for all)")
    ap.add_argument("--warm", action="store_true",
                    help="also run each synthetic configuration again with its references' baselines cached (a fresh "
                         "build cache; the first run's baselines, shared PCHs and MAC key copied): a training run's later steps")
    ap.add_argument("--steady", action="store_true",
                    help="after each synthetic configuration, submit other candidates for its tasks (fresh builds) to the "
                         "same evaluator: what every step of a training run sees (one evaluator for the run)")
    ap.add_argument("--cv", action="store_true", help="also evaluate one candidate --cv-reps times: runtime CV")
    ap.add_argument("--cv-reps", type=int, default=None, help="default 8 (dry 2)")
    ap.add_argument("--real", type=Path, help="a KernelBench run directory of real programs")
    ap.add_argument("--real-refs", type=Path, help="root holding KernelBench/level3 (default: two levels above --real)")
    ap.add_argument("--real-n", type=int, default=48, help="real programs at most")
    ap.add_argument("--beside", type=Path, help="an earlier run's JSON: print its figures beside these")
    ap.add_argument("--dry", action="store_true", help="CPU, C++ candidates, small sizes: exercises every path")
    a = ap.parse_args(argv)
    if a.per_task:
        a.configs = f"1,{a.per_task}"
    if a.configs is None:
        a.configs = "none" if a.real else ("1,2" if a.dry else "1,8")
    a.configs = [] if a.configs == "none" else [int(x) for x in a.configs.split(",")]
    a.tasks = a.tasks or (2 if a.dry else 24)
    a.tasks_multi = a.tasks_multi or (1 if a.dry else 3)
    a.kb_n = a.kb_n if a.kb_n is not None else (2 if a.dry else 5)
    a.cv_reps = a.cv_reps or (2 if a.dry else 8)
    a.deadline = a.deadline or (1800.0 if a.dry else 520.0)
    return a


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    a = parse(argv)
    t_start = time.perf_counter()
    deadline = t_start + a.deadline
    device = "cpu" if a.dry else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("this benchmark needs a CUDA GPU; use --dry on a CPU machine")
    h_over, _ = parse_overrides(a.overrides)
    base = {"device": device}
    if a.dry:  # small and quick: the code paths, not the figures
        base.update(timed_calls=5, trials=2, warmup=1, build_workers=2)
    salt = "dry" if a.dry else str(int(time.time()))  # dry: fresh temporary caches anyway
    tmp = tempfile.mkdtemp(prefix="km-bench-")
    kb_root = os.path.join(tmp, "kb")

    def cfg_for(name: str) -> dict:  # a fresh cache per configuration (dry: one, for one CPU build)
        return deep_merge(harness_config(deep_merge(base, h_over)),
                          {"cache_dir": os.path.join(tmp, "dry" if a.dry else name.replace("/", "_"))})

    from rewards.harness.config import HarnessConfig

    hcfg = HarnessConfig.from_mapping(cfg_for("parse"))
    jobs = [(name, work, "synthetic") for name, work in synthetic_configs(a, salt)]
    # --steady: other candidates for the same tasks (another salt: built afresh); dry runs share one source
    steady_work = dict(synthetic_configs(a, salt if a.dry else salt + "s")) if a.steady else {}
    notes: list[str] = []
    if a.real:
        refs = a.real_refs or a.real.resolve().parents[1]
        work, notes = real_work(a.real, refs, a.real_n)
        if not work:
            sys.exit(f"{a.real}: no program with a level3 reference under {refs}")
        jobs.append(("real", work, "real"))
    # weights of the remaining stages (harness runs, then KernelBench per group, then the CV):
    # the deadline is shared out as each stage starts
    # in the order they run (the harness's runs get more: a cut harness run is charged its slow
    # start, a cut serial KernelBench evaluation only its share of the pre-compile)
    stages = []
    compares = [(" ".join(c), parse_overrides(c)[0]) for c in a.compare or []]
    for group in ("synthetic", "real"):
        n = sum(g == group for _, _, g in jobs) * (1 + (len(compares) + a.warm + a.steady) * (group == "synthetic"))
        stages += [4.0] * n + ([2.0] if n and a.kb_n else [])
    stages += [1.0] if a.cv else []
    machine = os.path.join(tmp, "machine")  # what a machine keeps between runs: the shared PCHs
    pch_note = make_pch(hcfg, device, machine)
    if pch_note:
        notes.insert(0, pch_note)
    sampler = GpuSampler()
    rows: list[dict] = []
    cv = None
    gpu = torch.cuda.get_device_name(0) if device == "cuda" else "none (dry run on CPU)"

    def share() -> float:
        w = stages.pop(0)
        left = deadline - time.perf_counter()
        return time.perf_counter() + max(0.0, left * w / (w + sum(stages)))

    try:
        for group in ("synthetic", "real"):
            mine = [(name, work) for name, work, g in jobs if g == group]
            for name, work in mine:
                seed_pch(machine, cfg_for(name)["cache_dir"])
                then = (f"{name} {STEADY}", steady_work[name], share) if a.steady and group == "synthetic" else None
                rows += run_harness(name, work, cfg_for(name), share(), sampler, group, then)
                for i, (label, compare) in enumerate(compares if group == "synthetic" else []):
                    alt = f"{name} {label}"  # after the base: whatever warmed up in the first helps it
                    cache = {"cache_dir": os.path.join(tmp, f"compare{i}_" + name.replace("/", "_"))}  # builds again, even dry
                    seed_pch(machine, cache["cache_dir"])
                    rows += run_harness(alt, work, deep_merge(deep_merge(cfg_for(alt), compare), cache), share(),
                                        sampler, group)
                if a.warm and group == "synthetic":
                    warm = f"{name} {WARM}"
                    cfg = cfg_for(warm)
                    warm_cache(cfg_for(name)["cache_dir"], cfg["cache_dir"])
                    rows += run_harness(warm, work, cfg, share(), sampler, group)
            if mine and a.kb_n:  # KernelBench has nothing to share between candidates: one sample per group
                sub = kb_salted(kb_sample([w for _, w in mine], a.kb_n), salt)
                root = kb_root if a.dry else os.path.join(kb_root, group)
                # counts of the configurations as run, not of a --compare row's other settings
                plain = {name for name, _ in mine}
                made = {r["task"]: r["timed_calls"] for row in rows for r in row.get("records", [])
                        if row.get("evaluator") == "harness" and row["config"] in plain and r.get("timed_calls")}
                rows.append(run_kb(group, sub, hcfg, device, hcfg.n_build_workers(), share(), sampler, root,
                                   shared_build_dir=a.dry, isolate=a.kb_isolate,
                                   time_reference=not a.kb_no_ref_timing, calls_by_task=made))
        if a.cv:  # the first configuration's first candidate: its build is in that cache already
            name, t, src = _cv_candidate(jobs, a, salt, device)
            cv = run_cv(t, src, cfg_for(name), a.cv_reps, share())
    finally:
        sampler.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    report = render(a, rows, cv, notes, gpu, time.perf_counter() - t_start)
    print(report, flush=True)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(report + "\n")
        a.out.with_suffix(".json").write_text(json.dumps(
            {"gpu": gpu, "torch": torch.__version__, "cores": os.cpu_count(), "rows": rows, "ratios": ratios(rows),
             "cv": cv, "real": bool(a.real), "notes": notes}, default=str, indent=1))
    return 0


WARM = "baselines cached"
STEADY = "steady"


def warm_cache(cold: str, warm: str) -> None:
    """A cache holding what a training run's later steps find there: the references' baselines,
    the shared PCHs (made once per machine and torch) and the MAC key that signs both. The
    candidates' builds, reference outputs and everything else start fresh."""
    _copy(cold, warm, ("baselines", *PCH_STATE))


def make_pch(hcfg, device: str, machine: str) -> str | None:
    """The shared PCHs, made once before the configurations and copied into each one's fresh
    cache (``seed_pch``): a machine makes them on its first run and keeps them (the cache
    persists); made per configuration, every cold row was charged ~60 s of it. The time it took
    is printed beside the figures."""
    from rewards.harness import pchwarm

    if not hcfg.pch_wanted(device):
        return None
    t0 = time.perf_counter()
    sw = {k: v for k, v in hcfg.build_speed.items() if k not in ("pch_cflags", "pch_wait_s")}
    arch = "{}.{}".format(*torch.cuda.get_device_capability(0)) if device == "cuda" else None
    got = pchwarm.prebuild(machine, sw, hcfg.build_speed.get("pch_cflags", [[]]), None, arch=arch)
    return (f"shared PCHs made once before the configurations (a machine's first run pays this once, "
            f"not counted in the rows): {time.perf_counter() - t0:.1f} s, {got['sealed']} sealed"
            + (f", errors {got['errors']}" if got["errors"] else ""))


PCH_STATE = (".keys", os.path.join("buildspeed", "pch"), os.path.join("seals", "pch"))


def seed_pch(first: str, later: str) -> None:
    """The shared PCHs (and the MAC key sealing them) of the first configuration's cache, copied
    into a later configuration's fresh cache: a machine makes them once, not once per batch."""
    _copy(first, later, PCH_STATE)


def _copy(src: str, dst: str, subs: tuple) -> None:
    if os.path.abspath(src) == os.path.abspath(dst):
        return  # a dry run's one shared cache
    for sub in subs:
        if os.path.isdir(os.path.join(src, sub)):
            shutil.copytree(os.path.join(src, sub), os.path.join(dst, sub), dirs_exist_ok=True)


def _cv_candidate(jobs, a, salt: str, device: str):
    """(cache name, task, source): the first candidate of the first configuration, else a fresh one."""
    for name, work, _ in jobs:
        if work:
            return name, work[0][0], work[0][1]
    t = tc.tasks(1)[0]
    c = tc.make_source(t, 0, salt, device, shared_ext=a.dry, compile_backend="eager" if a.dry else "inductor",
                       sizes=t.small if a.dry else None)
    return "cv", c.task, c.source


def compare_lines(a, rows: list[dict]) -> list[str]:
    """Each --compare run against its configuration: what the default setting costs (the sandbox's
    target: under 5% of candidates per minute)."""
    out = []
    for label in (" ".join(c) for c in a.compare or []):
        for alt in (r for r in rows if r["config"].endswith(" " + label)):
            out += _compare_line(rows, alt, label)
    return out


def _compare_line(rows: list[dict], alt: dict, label: str) -> list[str]:
    base = next((r for r in rows if r["evaluator"] == "harness" and r["config"] == alt["config"].split(" ")[0]), None)
    if not base or not alt["cand_per_min"]:
        return []
    cost = 1 - base["cand_per_min"] / alt["cand_per_min"]
    target = (f" (sandbox target: under 5%: {'met' if cost < 0.05 else 'NOT met'})"
              if any(c.startswith("sandbox=") for c in label.split()) else "")
    return [f"  cost of the default against {label} ({base['config']}): {base['cand_per_min']:.2f} vs "
            f"{alt['cand_per_min']:.2f} cand/min, {cost:+.1%}{target}; median per candidate: total {fmt(_phase(base, 'total'), '.1f')} "
            f"vs {fmt(_phase(alt, 'total'), '.1f')} s, build {fmt(_phase(base, 'build'), '.1f')} vs "
            f"{fmt(_phase(alt, 'build'), '.1f')} s, slot_held {fmt(_phase(base, 'slot_held'), '.2f')} vs "
            f"{fmt(_phase(alt, 'slot_held'), '.2f')} s"]


def _phase(row: dict, key: str) -> float | None:
    xs = [rec["phases_s"][key] for rec in row["records"] if key in rec["phases_s"]]
    return statistics.median(xs) if xs else None


def render(a, rows, cv, notes, gpu, wall) -> str:
    lines = [f"harness throughput: real-style Level 3 candidates{' and real programs' if a.real else ''}; GPU {gpu}, "
             f"torch {torch.__version__}, {os.cpu_count()} cores; run {wall:.0f} s (deadline {a.deadline:.0f} s)"]
    if a.beside and a.beside.is_file():
        old = json.loads(a.beside.read_text())
        lines += [f"beside: {a.beside} ({old.get('gpu')})", *table(old["rows"])]
        lines += [f"  {r['config']}: harness / kernelbench-batch = {r['ratio']:.2f}x" for r in old["ratios"]]
        lines.append("this run:")
    lines += table(rows)
    rs = ratios(rows)
    lines += [f"  {r['config']}: harness / kernelbench-batch = {r['ratio']:.2f}x "
              f"({r['harness']:.2f} vs {r['kb']:.2f} cand/min, baseline sample: {r['baseline']})" for r in rs]
    lines += ["targets (H200):", *verdicts(rs, cv)]
    if cv:
        lines.append(f"runtime CV over {cv['n']} fresh evaluations of {cv['task']}: {cv['cv']:.3%} "
                     f"(runtimes us: {[round(x, 1) for x in cv['runtimes_us']]})")
    elif a.cv:
        lines.append("runtime CV: fewer than 2 evaluations finished")
    lines += compare_lines(a, rows)
    lines += phase_lines(rows) + host_lines(rows)
    kb = [r for r in rows if r["evaluator"] == "kernelbench-batch"]
    for r in kb:
        lines.append(f"  {r['config']} kernelbench-batch: pre-compile {r['pre_wall_s']:.1f} s for {r['n']} "
                     f"({r['builds']} pre-compiled), serial evaluation {r['eval_wall_s']:.1f} s, median import + construct "
                     f"{fmt(r['load_median_s'], '.1f')} s (builds in __init__ and helpers happen there), "
                     f"statuses {r['statuses']}; reference timed per candidate (its excessive-speedup check): "
                     f"{'yes' if r['time_reference'] else 'no'}; {'a process' if r['isolate'] else 'in-process'} per candidate")
    lines += [f"  note: {n}" for n in notes[:10]]
    if a.dry:
        lines.append("dry run: CPU, one shared extension source and cache, tiny sizes; the figures are not the H200's")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
