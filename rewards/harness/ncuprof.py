"""Kernel-level profile: Nsight Compute on the top kernels of one forward, parsed and classified.

``profile`` runs ``ncu --clock-control none --csv --page raw`` over a fresh process that builds the
model (reference or candidate, the candidate from the build cache) and profiles one forward after a
warm-up (``--profile-from-start off`` + cudaProfilerStart/Stop), restricted to the selected kernels
by name and to ``max_launches`` launches, under a wall-clock timeout. Results are cached on disk per
(source, task, shapes, GPU, selection). The ncu child runs with the sandbox's scrubbed environment
and scratch cwd, isolated as the workers are (sandbox.Policy), in a network namespace of its own
whose loopback is up: ncu talks to its target over loopback.

``parse_csv``, ``aggregate`` and ``classify`` are pure (tests run them on recorded ncu output).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from rewards.harness.kernels import base_name
from rewards.harness.opcost import roofline
from rewards.harness.sysprof import label

METRICS = {  # ncu metric -> our key
    "gpu__time_duration.sum": "duration_ns",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "mem_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy_pct",
    "sm__maximum_warps_per_active_cycle_pct": "theoretical_occupancy_pct",
    "launch__registers_per_thread": "registers",
    "launch__grid_size": "grid",
    "launch__block_size": "block",
    "dram__bytes_read.sum": "dram_read_bytes",
    "dram__bytes_write.sum": "dram_write_bytes",
    "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum": "local_ld_bytes",
    "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum": "local_st_bytes",
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum": "ffma",
    "sm__sass_thread_inst_executed_op_fadd_pred_on.sum": "fadd",
    "sm__sass_thread_inst_executed_op_fmul_pred_on.sum": "fmul",
    "sm__inst_executed_pipe_tensor.sum": "tensor_inst",
}
_KEEP = ("ID", "Kernel Name", "Function Name", "Block Size", "Grid Size")  # non-metric columns a result keeps
_NUM = re.compile(r"^-?[\d,]*\.?\d+(?:[eE][-+]?\d+)?$")


def _num(v: str):
    v = (v or "").strip().strip('"')
    if _NUM.match(v):
        return float(v.replace(",", ""))
    return None


def parse_csv(text: str) -> list[dict]:
    """One dict per profiled launch from ``ncu --csv --page raw`` output.

    Lines before the ``"ID",...`` header (``==PROF==`` messages, the program's own output) and the
    units row under it are skipped; numbers may carry thousands separators. ncu 2025.x prints ~320
    columns per launch on the raw page (device attributes, every .avg/.min/.max/.sum) whatever
    ``--metrics`` asks; a row shorter than the header was cut off (a stored excerpt) and is dropped.
    """
    header, body = _table(text)
    rows = []
    for r in body:
        if not r or not r[0].strip():  # the units row has an empty ID
            continue
        if len(r) < len(header):  # truncated: its metrics would silently be missing
            continue
        d = dict(zip(header, r, strict=False))
        name = d.get("Kernel Name") or d.get("Function Name") or ""
        row = {"id": int(_num(d.get("ID", "")) or 0), "name": name, "base": base_name(name), "label": label(name)}
        for metric, key in METRICS.items():
            if metric in d:
                row[key] = _num(d[metric])
        rows.append(row)
    return rows


def _table(text: str) -> tuple[list[str], list[list[str]]]:
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return [], []
    rows = list(csv.reader(io.StringIO("\n".join(ln for ln in lines[start:] if ln.startswith('"')))))
    return rows[0], rows[1:]


def compact_csv(text: str) -> str:
    """The ncu table cut to the columns ``parse_csv`` reads (header, units row, every launch).

    What a result stores instead of the raw output: ~12 kB of header alone in ncu 2025.x, so a
    prefix of the raw text kept only two launches and part of a third.
    """
    header, body = _table(text)
    if not header:
        return ""
    keep = [i for i, h in enumerate(header) if h in _KEEP or h in METRICS]
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    for r in [header, *body]:
        if len(r) >= len(header):
            w.writerow([r[i] for i in keep])
    return buf.getvalue()


def aggregate(rows: list[dict]) -> list[dict]:
    """Mean of each metric per kernel base name, with the number of launches profiled."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r["base"], []).append(r)
    out = []
    for base, rs in groups.items():
        a = {"base": base, "label": rs[0].get("label", base), "name": rs[0]["name"], "launches": len(rs)}
        for key in METRICS.values():
            vals = [r[key] for r in rs if r.get(key) is not None]
            if vals:
                a[key] = sum(vals) / len(vals)
        out.append(a)
    return sorted(out, key=lambda a: -(a.get("duration_ns") or 0) * a["launches"])


def classify(k: dict, thresholds: dict, bandwidth_Bps: float, peak_flops: float) -> dict:
    """memory-bound / compute-bound / latency/launch-bound, with the measured reasons and ceiling."""
    dur_us = (k.get("duration_ns") or 0.0) / 1e3
    mem = max(k.get("dram_pct") or 0.0, k.get("mem_pct") or 0.0)
    sm = k.get("sm_pct") or 0.0
    if dur_us < thresholds["launch_us"] and max(mem, sm) < thresholds["busy_pct"]:
        cls, why = "latency/launch-bound", f"{dur_us:.1f} us per launch, too short to fill the GPU"
    elif max(mem, sm) < thresholds["busy_pct"]:
        cls = "latency/launch-bound"
        why = (f"neither memory ({mem:.0f}% of peak) nor compute ({sm:.0f}%) is busy; "
               f"achieved occupancy {k.get('occupancy_pct') or 0:.0f}%")
    elif mem >= sm:
        cls, why = "memory-bound", f"memory throughput {mem:.0f}% of peak vs compute {sm:.0f}%"
    else:
        cls, why = "compute-bound", f"compute throughput {sm:.0f}% of peak vs memory {mem:.0f}%"
    out = {"class": cls, "why": why, "duration_us": dur_us}
    nbytes = (k.get("dram_read_bytes") or 0.0) + (k.get("dram_write_bytes") or 0.0)
    flops = 2 * (k.get("ffma") or 0.0) + (k.get("fadd") or 0.0) + (k.get("fmul") or 0.0)
    if nbytes or flops:  # the measured roofline: this kernel's own traffic and fp32 work
        rl = roofline(flops, max(nbytes, 1.0), bandwidth_Bps, peak_flops)
        out.update(measured_bytes=nbytes, measured_fp32_flops=flops, ceiling_us=rl["ceiling_us"],
                   roofline_bound=rl["bound"], fraction_of_ceiling=rl["ceiling_us"] / dur_us if dur_us else None)
    spill = (k.get("local_ld_bytes") or 0.0) + (k.get("local_st_bytes") or 0.0)
    out["spills"] = spill > 0
    out["local_bytes"] = spill
    return out


# -- selection and the ncu run ----------------------------------------------------------------
def select(top_kernels: list[dict], cfg: dict) -> list[dict]:
    """The top-k kernels of a system profile worth a replay (share and time thresholds)."""
    chosen = [k for k in top_kernels if k["share"] >= cfg["min_share"] and k["mean_us"] >= cfg["min_kernel_us"]]
    return chosen[: cfg["top_k"]]


def command(ncu: str, bases: list[str], launches: int, jobfile: str) -> list[str]:
    # the base name may come with a namespace, template arguments or a parameter list
    regex = "regex:(^|[: ])(" + "|".join(re.escape(b) for b in sorted(set(bases))) + ")($|[<(])"
    return [ncu, "--clock-control", "none", "--csv", "--page", "raw", "--print-units", "base",
            "--metrics", ",".join(METRICS), "--profile-from-start", "off", "--kernel-name-base", "function",
            "--kernel-name", regex, "--launch-count", str(launches), "--target-processes", "all",
            sys.executable, "-m", "rewards.harness.ncuprof", "run", jobfile]


def find_ncu(path: str = "auto") -> str | None:
    if path != "auto":
        return path if shutil.which(path) else None
    for c in ("ncu", "/usr/local/cuda/bin/ncu"):
        if shutil.which(c):
            return shutil.which(c)
    return None


def cache_key(job: dict, bases: list[str], gpu: str | None) -> str:
    material = {k: job.get(k) for k in ("kind", "task_source", "overrides", "candidate_source", "seed", "env",
                                        "model_mode", "precision", "shared_namespace")}
    material.update(bases=sorted(bases), gpu=gpu, metrics=sorted(METRICS), v=2)  # v2: raw_csv is the compact table
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()[:24]


def profile(job: dict, top_kernels: list[dict], cfg: dict, ceilings: dict, dtype: str,
            cache_dir: str, gpu: str | None = None, sandbox=None) -> dict:
    """Kernel-level profile of the selected top kernels; never raises for an ncu failure."""
    from rewards.harness.sandbox import scrubbed_env

    chosen = select(top_kernels, cfg)
    if not chosen:
        return {"status": "skipped", "reason": "no kernel over the time thresholds"}
    ncu = find_ncu(cfg.get("ncu", "auto"))
    if ncu is None:
        return {"status": "unavailable", "reason": "ncu not found"}
    bases = [k["base"] for k in chosen]
    key = cache_key(job, bases, gpu)
    path = os.path.join(cache_dir, "ncu", key + ".json")
    try:
        with open(path) as f:
            return {**json.load(f), "cached": True}
    except (OSError, ValueError):
        pass
    launches = int(min(cfg["max_launches"], max(len(chosen), sum(max(1, round(k["calls"])) for k in chosen))))
    scratch = tempfile.mkdtemp(prefix="km-ncu-", dir=os.path.join(cache_dir, "scratch"))
    jobfile = os.path.join(scratch, "job.json")
    with open(jobfile, "w") as f:
        json.dump(job, f)
    t0 = time.perf_counter()
    argv, uid, more = sandbox.launch(command(ncu, bases, launches, jobfile), scratch, loopback=True, ncu=True) \
        if sandbox is not None else (command(ncu, bases, launches, jobfile), None, {})  # netns with lo up
    proc = subprocess.Popen(argv, cwd=scratch, env=scrubbed_env({**job.get("env", {}), "HOME": scratch, **more}),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=cfg["timeout_s"])
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        if sandbox is not None:
            sandbox.finish(uid)
        shutil.rmtree(scratch, ignore_errors=True)
        return {"status": "timeout", "reason": f"ncu exceeded {cfg['timeout_s']} s", "ncu_s": time.perf_counter() - t0}
    if sandbox is not None:
        sandbox.finish(uid)
    shutil.rmtree(scratch, ignore_errors=True)
    res = result_from_csv(stdout, chosen, cfg["thresholds"], ceilings, dtype)
    res["ncu_s"] = time.perf_counter() - t0
    if res["status"] != "ok":
        res["reason"] = (res.get("reason") or "") + " | " + (stderr.strip().splitlines() or [""])[-1][:300]
        return res
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(res, f)
    os.replace(path + ".tmp", path)
    return {**res, "cached": False}


def result_from_csv(text: str, chosen: list[dict], thresholds: dict, ceilings: dict, dtype: str) -> dict:
    rows = parse_csv(text)
    if not rows:
        err = next((ln for ln in text.splitlines() if "ERR" in ln or "rror" in ln), "no profiled kernel in ncu output")
        return {"status": "failed", "reason": err[:300], "raw_csv": text[-4000:]}
    bw = float(ceilings["bandwidth_Bps"])
    peak = float(ceilings["peak_flops"].get(dtype, ceilings["peak_flops"]["float32"]))
    share = {**{k.get("label", k["base"]): k for k in chosen}, **{k["base"]: k for k in chosen}}
    kernels = []
    for a in aggregate(rows):
        k = {**a, **classify(a, thresholds, bw, peak)}
        s = share.get(a["base"]) or share.get(a["label"])
        if s:
            k["share"], k["time_us_per_forward"] = s["share"], s["time_us"]
        kernels.append(k)
    return {"status": "ok", "kernels": kernels, "raw_csv": compact_csv(text)}


# -- the profiled process (run under ncu) --------------------------------------------------------
def _run(jobfile: str) -> None:
    import torch

    from rewards.harness import buildcache, precision, timing
    from rewards.harness.reference import load_module, shared_names

    with open(jobfile) as f:
        job = json.load(f)
    precision.apply(job.get("precision"))  # the same math as the timed workers
    ref = load_module(job["task_source"], job["overrides"], name="reference")
    torch.manual_seed(job["seed"])
    init = ref.get_init_inputs()
    torch.manual_seed(job["seed"])
    if job["kind"] == "candidate":
        import types

        buildcache.install(job["cache_root"], job["fast_build"], serve_failures=True)
        mod = types.ModuleType("candidate")
        mod.__file__ = os.path.join(os.getcwd(), "candidate.py")
        if job.get("shared_namespace"):  # as the candidate worker loads it
            mod.__dict__.update(shared_names(job["task_source"], job["overrides"]))
        sys.modules["candidate"] = mod
        exec(compile(job["candidate_source"], mod.__file__, "exec"), mod.__dict__)
        model = mod.ModelNew(*init)
    else:
        model = ref.Model(*init)
    model = model.cuda()
    if job.get("model_mode") == "eval":  # train (KernelBench's): the model as constructed
        model.eval()
    torch.manual_seed(job["seed"] + 1001)
    xs = timing.to_device(ref.get_inputs(), "cuda")
    with torch.no_grad():
        for _ in range(2):
            model(*xs)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        model(*xs)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "run":
        _run(sys.argv[2])
    else:
        sys.exit("usage: python -m rewards.harness.ncuprof run <job.json>")
