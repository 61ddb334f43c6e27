"""Profile -> feedback: which kernel to attack, why (measured numbers), and its ceiling.

Pure functions over the harness evidence: ``system_profile`` (torch.profiler, sysprof.summarize),
``kernel_profile`` (ncu, ncuprof) and the reference's ``ref_system_profile``. ``diagnose`` gives
the data record stored with the verifier turn; ``render`` the short text for the Coder;
``render_reference`` the reference's profile for the Planner.
"""

from __future__ import annotations

from typing import Any

IDLE_FRACTION = 0.2  # the GPU idle this share of a forward is a host-side problem worth a line


def _us(x: float | None) -> str:
    if x is None:
        return "?"
    return f"{x / 1000:.2f} ms" if x >= 1000 else f"{x:.1f} us"


def _ncu_by_base(kp: dict | None) -> dict[str, dict]:
    if not kp or kp.get("status") != "ok":
        return {}
    out = {}
    for k in kp.get("kernels", []):  # ncu may print a wrapper's name or its template argument
        out[k["base"]] = out[k.get("label") or k["base"]] = k
    return out


def _region_ceiling(sp: dict, row: dict, ref_sp: dict | None) -> dict | None:
    """The estimated roofline of the op or module a kernel belongs to (shapes -> bytes, FLOPs).

    A candidate's region gets the FLOPs of the reference module with the same input and output
    shapes when that is larger: a hand-written kernel has no aten op whose shapes tell its work.
    """
    for r in sp.get("ops", []):
        if row.get("op") and r["op"] == row["op"] and r.get("ceiling_us") is not None:
            return {"region": f"op {r['op']}", "time_us": r["time_us"], "ceiling_us": r["ceiling_us"],
                    "bound": r["bound"], "flops": r["flops"], "bytes": r["bytes"]}
    ce = sp.get("ceilings") or {}
    for r in sp.get("modules", []):
        if not (row.get("module") and r["module"] == row["module"] and r.get("bytes")):
            continue
        flops = r["flops"]
        for m in (ref_sp or {}).get("modules", []):
            if m.get("in_shapes") == r.get("in_shapes") and m.get("out_shapes") == r.get("out_shapes"):
                flops = max(flops, m["flops"])
                break
        if not (ce.get("bandwidth_Bps") and ce.get("peak_flops")):
            return None
        t_mem, t_cmp = r["bytes"] / ce["bandwidth_Bps"], flops / ce["peak_flops"]
        return {"region": f"module {r['module']}", "time_us": r["time_us"], "ceiling_us": max(t_mem, t_cmp) * 1e6,
                "bound": "compute" if t_cmp > t_mem else "memory", "flops": flops, "bytes": r["bytes"]}
    return None


def _advice(cls: str | None, k: dict, n: dict) -> str:
    if n.get("spills"):
        return (f"it spills {n.get('local_bytes', 0):.0f} bytes to local memory with "
                f"{n.get('registers', 0):.0f} registers/thread: cut live registers or raise __launch_bounds__")
    if cls == "memory-bound":
        return "fuse it with its producer/consumer so the tensor is not re-read from DRAM, and vectorise its loads"
    if cls == "compute-bound":
        return "use tensor cores or a tiled (shared-memory) algorithm; it already saturates the math pipes it uses"
    if cls == "latency/launch-bound":
        return ("it neither fills memory nor compute: give it more parallel work per launch (larger blocks, "
                "more blocks), raise occupancy, or fuse it into a neighbour")
    if k.get("origin") == "library":
        return "it is a library kernel: fuse the elementwise work around it into its epilogue or a neighbour"
    return "optimise or fuse it first"


def diagnose(ev: dict[str, Any], runtime_us: float | None = None) -> dict[str, Any] | None:
    """The structured record: target kernel, measured reasons, ceilings, host-side issues."""
    sp = ev.get("system_profile")
    if not sp or not sp.get("top_kernels"):
        return None
    ncu = _ncu_by_base(ev.get("kernel_profile"))
    rows = sp["top_kernels"]

    def recoverable(r):  # time above the kernel's own measured ceiling; unknown ceiling: all of it
        n = ncu.get(r["base"]) or ncu.get(r.get("label"), {})
        c = n.get("ceiling_us")
        return r["time_us"] - (c * r["calls"] if c is not None else 0.0)

    # prefer the program's own kernels among the heavy ones: those are the ones the Coder can change
    heavy = [r for r in rows if r["share"] >= 0.1] or rows[:1]
    target = max(heavy, key=lambda r: (recoverable(r) * (1.0 if r["origin"] == "candidate" else 0.8)))
    n = ncu.get(target["base"]) or ncu.get(target.get("label"), {})
    rec: dict[str, Any] = {"target": {k: target.get(k) for k in ("name", "base", "label", "origin", "share", "time_us",
                                                                   "calls", "mean_us", "op", "module")}}
    if n:
        rec["target"].update({k: n.get(k) for k in ("class", "why", "dram_pct", "sm_pct", "occupancy_pct",
                                                      "registers", "spills", "local_bytes", "ceiling_us",
                                                      "fraction_of_ceiling")})
    region = _region_ceiling(sp, target, ev.get("ref_system_profile"))
    if region:
        rec["region"] = region
    if ev.get("physical_floor_us"):
        rec["model_floor_us"] = ev["physical_floor_us"]
    rec["system"] = {k: sp.get(k) for k in ("kernel_time_us", "gpu_busy_us", "gpu_idle_fraction",
                                            "launches_per_forward", "cpu_us_per_forward", "cpu_bound",
                                            "syncs_per_forward", "copies", "largest_gap_us")}
    rec["advice"] = _advice(n.get("class"), target, n)
    issues = []
    if sp.get("gpu_idle_fraction", 0) >= IDLE_FRACTION:
        issues.append(f"the GPU is idle {sp['gpu_idle_fraction']:.0%} of the forward "
                      f"({sp.get('idle_gaps_over_threshold', 0):.0f} gaps >= {sp.get('gap_threshold_us', 0):.0f} us, "
                      f"largest {_us(sp.get('largest_gap_us'))}); {sp.get('launches_per_forward', 0):.0f} launches "
                      f"per forward: fuse kernels or capture a CUDA graph")
    if sp.get("cpu_bound"):
        issues.append(f"host-bound: the CPU spends {_us(sp.get('cpu_us_per_forward'))} per forward to issue "
                      f"{_us(sp.get('gpu_busy_us'))} of GPU work (under the profiler)")
    cp = sp.get("copies") or {}
    for kind, label in (("HtoD", "host-to-device"), ("DtoH", "device-to-host")):
        if cp.get(f"{kind}_count"):
            issues.append(f"{cp[f'{kind}_count']:.0f} {label} copies per forward ({cp.get(f'{kind}_bytes', 0) / 1e6:.2f} MB): "
                          "keep tensors on the GPU")
    if sp.get("syncs_per_forward"):
        issues.append(f"{sp['syncs_per_forward']:.0f} synchronisation(s) per forward "
                      f"({', '.join(sp.get('sync_calls') or [])}): remove them from forward()")
    rec["host_issues"] = issues
    if runtime_us:
        rec["runtime_us"] = runtime_us
    return rec


def render(rec: dict[str, Any]) -> str:
    """Short text for the Coder (a few lines)."""
    t = rec["target"]
    where = ", ".join(x for x in (f"op {t['op']}" if t.get("op") else "", f"module {t['module']}" if t.get("module") else "") if x)
    lines = [f"attack: {t.get('label') or t['base']} ({t['origin']}{'; ' + where if where else ''}): {t['share']:.0%} of GPU time, "
             f"{_us(t['time_us'])} per forward in {t['calls']:.0f} launch(es)"]
    if t.get("class"):
        extra = (f"DRAM {t.get('dram_pct') or 0:.0f}% / SM {t.get('sm_pct') or 0:.0f}% of peak, occupancy "
                 f"{t.get('occupancy_pct') or 0:.0f}%, {t.get('registers') or 0:.0f} regs/thread"
                 + (", spills to local memory" if t.get("spills") else ""))
        lines.append(f"why: {t['class']}: {t['why']} ({extra})")
    ceil = []
    if t.get("ceiling_us") is not None:
        ceil.append(f"this kernel's own traffic at peak takes {_us(t['ceiling_us'])} per launch vs "
                    f"{_us(t['mean_us'])} now ({(t.get('fraction_of_ceiling') or 0):.0%} of its roofline)")
    r = rec.get("region")
    if r:
        ceil.append(f"{r['region']} must move {(r.get('bytes') or 0) / 1e6:.1f} MB and do {r['flops'] / 1e9:.2f} GFLOP: "
                    f"{_us(r['ceiling_us'])} at the {r['bound']} roof vs {_us(r['time_us'])} measured")
    if rec.get("model_floor_us") and rec.get("runtime_us"):
        ceil.append(f"whole model floor {_us(rec['model_floor_us'])} vs {_us(rec['runtime_us'])} now")
    if ceil:
        lines.append("ceiling: " + "; ".join(ceil))
    lines.append(f"do: {rec['advice']}")
    lines += [f"host: {i}" for i in rec.get("host_issues", [])]
    return "\n".join(lines)


def render_reference(prof: dict[str, Any] | None, top: int = 5) -> str | None:
    """The reference's system-level profile (plus ncu classes when present), for the Planner."""
    sp = (prof or {}).get("system")
    if not sp or not sp.get("top_kernels"):
        return None
    ncu = _ncu_by_base((prof or {}).get("kernel"))
    lines = []
    if prof.get("ref_runtime_us"):
        lines.append(f"eager runtime {_us(prof['ref_runtime_us'])} per forward; GPU busy {_us(sp['gpu_busy_us'])}, "
                     f"idle {sp['gpu_idle_fraction']:.0%}; {sp['launches_per_forward']:.0f} launches, "
                     f"CPU {_us(sp.get('cpu_us_per_forward'))} per forward; {sp['syncs_per_forward']:.0f} syncs")
    lines.append("top kernels (share of GPU time, where they come from):")
    for k in sp["top_kernels"][:top]:
        n = ncu.get(k["base"]) or ncu.get(k.get("label"))
        cls = f", {n['class']} (DRAM {n.get('dram_pct') or 0:.0f}%, SM {n.get('sm_pct') or 0:.0f}%)" if n else ""
        lines.append(f"- {k.get('label') or k['base']}: {k['share']:.0%}, {_us(k['time_us'])} in {k['calls']:.0f} launch(es); "
                     f"op {k.get('op') or '?'} in module {k.get('module') or '?'}{cls}")
    mods = [m for m in sp.get("modules", []) if m["module"] != "<root>" and m.get("ceiling_us") is not None][:top]
    if mods:
        lines.append("modules (measured vs roofline ceiling from their shapes):")
        lines += [f"- {m['module']} ({m.get('type')}): {m['share']:.0%}, {_us(m['time_us'])} vs "
                  f"{_us(m['ceiling_us'])} {m['bound']}-bound" for m in mods]
    cp = sp.get("copies") or {}
    if cp.get("HtoD_count") or cp.get("DtoH_count"):
        lines.append(f"copies per forward: {cp.get('HtoD_count', 0):.0f} H2D, {cp.get('DtoH_count', 0):.0f} D2H")
    return "\n".join(lines)
