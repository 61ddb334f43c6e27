"""System-level profile of a model's forward from one torch.profiler run.

``capture`` (GPU worker side) runs ``calls`` forwards under torch.profiler with every module's
forward wrapped in a ``record_function`` range (``km::forward`` for the root, ``km::module::<name>``
for the others) and records each module's input/output/parameter bytes. ``trim_events`` keeps
the trace events the summary needs (the "event table", also the fixture format under
tests/fixtures/profiles/). ``summarize`` is pure: kernels, copies, syncs and CPU time are
attributed to a forward through the profiler's correlation id (kernel -> the runtime call that
launched it -> the innermost op and module range around that call on the host).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
from collections import Counter, defaultdict

from rewards.harness import opcost
from rewards.harness.kernels import MARKER_KERNEL, base_name, bracketed_calls

FORWARD = "km::forward"
MODULE = "km::module::"
_KEEP = {"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "cpu_op",
         "user_annotation", "cuda_sync"}
_LAUNCH = ("LaunchKernel", "cuLaunch", "cudaLaunch", "GraphLaunch")
_SYNC = ("Synchronize", "cudaStreamWaitEvent")


# -- capture (needs torch and a GPU) ---------------------------------------------------------
def _scripted(m) -> bool:
    import torch

    return isinstance(m, torch.jit.ScriptModule)  # RecursiveScriptModule too


class annotate:
    """Wrap every module call of ``model`` in a profiler range; record module I/O bytes.

    TorchScript modules take no Python hooks (and their children run inside TorchScript), so a
    ScriptModule and everything under it is left unwrapped and named in ``skipped``; a module
    that refuses a hook for any other reason is skipped the same way. ``hooked_root`` says
    whether the root range comes from the hooks (else ``capture`` opens it around the call).
    """

    def __init__(self, model):
        self.model, self.handles, self.modules, self.stack = model, [], {}, []
        self.skipped: list[str] = []
        self.hooked_root = False

    def __enter__(self):
        import torch

        def nbytes(xs):
            ts = [x for x in (xs if isinstance(xs, (list, tuple)) else [xs]) if isinstance(x, torch.Tensor)]
            return sum(t.numel() * t.element_size() for t in ts), [list(t.shape) for t in ts]

        scripted: list[str] = []  # prefixes of ScriptModules: their subtrees are skipped
        for name, mod in self.model.named_modules():
            label = FORWARD if name == "" else MODULE + name
            if any(name == p or name.startswith(p + ".") or p == "" for p in scripted):
                continue
            if _scripted(mod):
                scripted.append(name)
                self.skipped.append(name or "<root>")
                continue

            def pre(m, args, label=label):
                rf = torch.autograd.profiler.record_function(label)
                rf.__enter__()
                self.stack.append(rf)

            def post(m, args, out, label=label, name=name):
                self.stack.pop().__exit__(None, None, None)
                if label not in self.modules:
                    ib, ishapes = nbytes(args)
                    ob, oshapes = nbytes(out)
                    pb = sum(p.numel() * p.element_size() for p in m.parameters(recurse=True))
                    self.modules[label] = {"name": name or "<root>", "type": type(m).__name__,
                                           "in_bytes": ib, "out_bytes": ob, "param_bytes": pb,
                                           "in_shapes": ishapes, "out_shapes": oshapes}

            hs = []
            try:
                hs.append(mod.register_forward_pre_hook(pre))
                hs.append(mod.register_forward_hook(post))
            except Exception:  # noqa: BLE001 - an unhookable module is profiled without its range
                for h in hs:
                    h.remove()
                self.skipped.append(name or "<root>")
                continue
            self.handles += hs
            self.hooked_root = self.hooked_root or name == ""
        return self

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()
        while self.stack:  # a forward that raised leaves ranges open
            self.stack.pop().__exit__(None, None, None)


LAZY_INDUCTOR_ENV = "KM_PROFILE_LAZY_INDUCTOR"  # "0": torch.profiler imports torch._inductor as it does upstream


@contextlib.contextmanager
def _inductor_unimported():
    """Start a torch.profiler session without importing torch._inductor. Its ``prepare_trace``
    evaluates ``hasattr(torch, "_inductor")`` to read inductor's cudagraphs flag, and that lazy
    attribute imports torch._inductor, torch._dynamo and sympy (822 modules; 1.15 CPU-s on a
    2-core CPU box; 5-14 s of the timed worker's ``profile_start`` on the H100 host beside 8
    builds, against 0.04-0.1 s where the candidate had imported them through torch.compile).
    A process that never imported inductor has that flag at its default (off) and ran no inductor
    CUDA graph, so the flag's workaround has nothing to do: the name is hidden from torch's lazy
    loader while the session starts. Where inductor is loaded, or torch has no such loader, or
    ``harness.profiler_lazy_inductor`` is off, nothing changes."""
    import torch

    lazy = getattr(torch, "_lazy_modules", None)
    hide = (os.environ.get(LAZY_INDUCTOR_ENV, "1") != "0" and isinstance(lazy, set) and "_inductor" in lazy
            and "torch._inductor" not in sys.modules)
    if hide:
        lazy.discard("_inductor")
    try:
        yield
    finally:
        if hide:
            lazy.add("_inductor")


@contextlib.contextmanager
def session(**kw):
    """A CPU+CUDA torch.profiler session, started under ``_inductor_unimported`` (only its start
    reads the flag: the candidate's own forwards run with torch's lazy loader whole)."""
    from torch.profiler import ProfilerActivity, profile

    with contextlib.ExitStack() as stack:
        with _inductor_unimported():
            prof = stack.enter_context(profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], **kw))
        yield prof


def warm_up() -> float:
    """One tiny CUDA profiler session. The first session cost seconds in a fresh process (4.0 s
    on the H200, scripts/probe_slot_costs.py), mostly torch.profiler importing inductor, which
    ``session`` now skips (H100, session 20: 0.08 s median ``profile_start``); a profiling worker
    pays what is left here, while it waits for its candidate, instead of in the GPU slot. Never in
    a worker that times: CUPTI stays attached after a session and slows later launches
    (pytorch/pytorch#144455)."""
    import torch

    t0 = time.perf_counter()
    x = torch.ones(8, device="cuda")
    with session():
        (x + 1).sum()
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def capture(model, xs: list, calls: int, record_shapes: bool = True, scratch: str | None = None) -> dict:
    """Profile ``calls`` forwards; returns the event table and the module records."""
    return export(record(model, xs, calls, record_shapes), scratch)


def record(model, xs: list, calls: int, record_shapes: bool = True, warm: bool = True) -> dict:
    """The part of ``capture`` that runs on the GPU (the only part that must be alone on it):
    the profiled forwards, the profiler stopped. ``export`` turns it into the event table.
    ``warm=False``: the caller ran the warming forward already (outside the GPU lock)."""
    import torch

    t0 = time.perf_counter()
    with torch.no_grad():
        if warm:
            model(*xs)  # warm: lazy init and autotuning stay out of the profile
        torch.cuda.synchronize()
        ann = annotate(model) if isinstance(model, torch.nn.Module) else None
        with session(record_shapes=record_shapes) as prof:
            if ann:
                ann.__enter__()
            fn = model if ann and ann.hooked_root else _ranged(model)
            try:
                bracketed_calls(fn, xs, calls)  # markers for kernels.hidden_work
            finally:
                if ann:
                    ann.__exit__(None, None, None)
    return {"prof": prof, "modules": ann.modules if ann else {}, "calls": calls, "capture_s": time.perf_counter() - t0}


def export(rec: dict, scratch: str | None = None) -> dict:
    """``record``'s profiler written out and trimmed (host work only: the trace of a big model
    took seconds to write and parse on the H200 host)."""
    path = os.path.join(scratch or os.getcwd(), "trace.json")
    rec["prof"].export_chrome_trace(path)
    return {"events": trim_events(path), "modules": rec["modules"], "calls": rec["calls"],
            "trace_path": path, "capture_s": rec["capture_s"]}


def _ranged(model):
    """``model`` called inside the root range: for a root that takes no hooks (ScriptModule)."""
    import torch

    def call(*xs):
        with torch.autograd.profiler.record_function(FORWARD):
            return model(*xs)
    return call


def trim_events(path: str) -> list[dict]:
    """The event table: complete events of the kept categories, with the args we read."""
    with open(path) as f:
        events = json.load(f).get("traceEvents", [])
    out = []
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in _KEEP:
            continue
        a = e.get("args") or {}
        r = {"cat": e["cat"], "name": e.get("name", ""), "ts": float(e.get("ts", 0)),
             "dur": float(e.get("dur", 0)), "tid": e.get("tid")}
        for k_src, k in (("correlation", "corr"), ("stream", "stream"), ("bytes", "bytes"),
                         ("Input Dims", "dims"), ("Input type", "types"), ("Concrete Inputs", "concrete")):
            if a.get(k_src) not in (None, [], ""):
                r[k] = a[k_src]
        out.append(r)
    return out


# -- summary (pure) ---------------------------------------------------------------------------
def _estimate(op: dict) -> dict | None:
    """opcost's estimate of one op; an overload it misreads is no estimate, not a lost profile
    (the kernel attribution the reward reads comes from the same summary)."""
    try:
        return opcost.estimate(op["name"], op.get("dims"), op.get("types"), op.get("concrete"))
    except (ArithmeticError, TypeError, ValueError, IndexError):
        return None


def _enclosing(ranges: list[tuple[float, float, str]], ts: float) -> list[str]:
    """Names of the ranges containing ts, outermost first (ranges sorted by start)."""
    return [n for a, b, n in ranges if a <= ts <= b]


def _union(iv: list[tuple[float, float]]) -> tuple[float, list[float]]:
    """Busy time of intervals and the idle gaps between them."""
    iv = sorted(iv)
    busy, gaps, end = 0.0, [], None
    for a, b in iv:
        if end is None or a > end:
            if end is not None:
                gaps.append(a - end)
            busy += b - a
            end = b
        elif b > end:
            busy += b - end
            end = b
    return busy, gaps


def summarize(events: list[dict], calls: int, modules: dict | None = None, declared: list[str] | None = None,
              top: int = 10, gap_us: float = 5.0, ceilings: dict | None = None, dtype: str = "float32") -> dict:
    """Compact system-level breakdown, per forward (all times in microseconds)."""
    declared = declared or []
    fwd = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                 if e["cat"] == "user_annotation" and e["name"] == FORWARD)
    ranges = defaultdict(list)  # host thread -> [(start, end, name)] of ops and module ranges
    for e in events:
        if e["cat"] in ("cpu_op", "user_annotation"):
            ranges[e["tid"]].append((e["ts"], e["ts"] + e["dur"], e["name"], e))
    for v in ranges.values():
        v.sort(key=lambda r: (r[0], -r[1]))
    launch = {}  # correlation -> host context of the runtime call
    host_syncs = []
    for e in events:
        if e["cat"] not in ("cuda_runtime", "cuda_driver", "cuda_sync"):
            continue
        if "corr" in e:
            launch[e["corr"]] = e
        if e["cat"] == "cuda_sync" or any(s in e["name"] for s in _SYNC) or e["name"] in ("cudaMemcpy", "cuMemcpyDtoH_v2"):
            host_syncs.append(e)

    def forward_of(ts):
        for i, (a, b) in enumerate(fwd):
            if a <= ts <= b:
                return i
        return None

    def context(corr):
        e = launch.get(corr)
        if e is None:
            return None, None, None
        inner_op, mods = None, []
        for a, b, n, ev in ranges.get(e["tid"], []):
            if a <= e["ts"] <= b:
                if ev["cat"] == "cpu_op":
                    inner_op = ev
                elif n.startswith(MODULE) or n == FORWARD:
                    mods.append(n)
        return forward_of(e["ts"]), inner_op, mods

    n_fwd = len(fwd) or calls
    kern, gpu_iv, copies, unattributed = {}, defaultdict(list), Counter(), 0
    mod_time, op_cost = Counter(), {}
    for e in events:
        if e["cat"] not in ("kernel", "gpu_memcpy", "gpu_memset") or MARKER_KERNEL in e["name"]:
            continue
        f, op, mods = context(e.get("corr"))
        if fwd and f is None:
            unattributed += 1
            continue
        gpu_iv[f].append((e["ts"], e["ts"] + e["dur"]))
        if e["cat"] == "gpu_memcpy":
            kind = next((k for k in ("HtoD", "DtoH", "DtoD", "PtoP") if k in e["name"]), "other")
            copies[f"{kind}_count"] += 1
            copies[f"{kind}_bytes"] += float(e.get("bytes") or 0)
            copies[f"{kind}_us"] += e["dur"]
            continue
        if e["cat"] == "gpu_memset":
            copies["memset_count"] += 1
            continue
        k = kern.setdefault(e["name"], {"name": e["name"], "base": base_name(e["name"]), "time_us": 0.0,
                                        "calls": 0, "ops": Counter(), "modules": Counter(),
                                        "origin": "candidate" if base_name(e["name"]) in declared else "library"})
        k["time_us"] += e["dur"]
        k["calls"] += 1
        if op is not None:
            k["ops"][op["name"]] += 1
            if id(op) not in op_cost:
                op_cost[id(op)] = (op, _estimate(op))
        if mods:
            k["modules"][mods[-1]] += 1  # the innermost module names the kernel
            for m in mods:  # module time is inclusive: a region's kernels, nested ones too
                mod_time[m] += e["dur"]
    total = sum(k["time_us"] for k in kern.values())
    ks = sorted(kern.values(), key=lambda k: -k["time_us"])
    ce = ceilings or {}
    bw, peak = ce.get("bandwidth_Bps"), (ce.get("peak_flops") or {}).get(dtype)

    top_rows = []
    for k in ks[:top]:
        row = {"name": k["name"], "base": k["base"], "label": label(k["name"]), "origin": k["origin"],
               "time_us": k["time_us"] / n_fwd, "share": k["time_us"] / total if total else 0.0,
               "calls": k["calls"] / n_fwd, "mean_us": k["time_us"] / max(k["calls"], 1),
               "op": k["ops"].most_common(1)[0][0] if k["ops"] else None,
               "module": _short(k["modules"].most_common(1)[0][0]) if k["modules"] else None}
        top_rows.append(row)

    # cost of each op call, summed per op name and per module (estimates for a roofline)
    ops = defaultdict(lambda: {"flops": 0.0, "bytes": 0.0, "calls": 0})
    for op, c in op_cost.values():
        if c:
            o = ops[op["name"]]
            o["flops"] += c["flops"] / n_fwd
            o["bytes"] += c["bytes"] / n_fwd
            o["calls"] += 1 / n_fwd
    kernel_by_op = Counter()
    for k in kern.values():
        for name, n in k["ops"].items():
            kernel_by_op[name] += k["time_us"] * n / max(k["calls"], 1) / n_fwd
    op_rows = []
    for name, o in sorted(ops.items(), key=lambda kv: -kernel_by_op[kv[0]]):
        r = {"op": name, "time_us": kernel_by_op[name], "flops": o["flops"], "bytes": o["bytes"],
             "calls": o["calls"]}
        if bw and peak:
            rl = opcost.roofline(o["flops"], o["bytes"], float(bw), float(peak))
            r.update(ceiling_us=rl["ceiling_us"], bound=rl["bound"], intensity=rl["intensity"])
        op_rows.append(r)

    # GPU timeline per forward
    busy_l, span_l, gaps_all = [], [], []
    for iv in gpu_iv.values():
        busy, gaps = _union(iv)
        busy_l.append(busy)
        span_l.append(max(b for _, b in iv) - min(a for a, _ in iv))
        gaps_all += gaps
    busy_us = sum(busy_l) / n_fwd
    span_us = sum(span_l) / n_fwd
    big = [g for g in gaps_all if g >= gap_us]
    launches = sum(1 for e in events if e["cat"] in ("cuda_runtime", "cuda_driver")
                   and any(s in e["name"] for s in _LAUNCH) and (not fwd or forward_of(e["ts"]) is not None))
    cpu_us = sum(b - a for a, b in fwd) / n_fwd if fwd else None
    launch_api_us = sum(e["dur"] for e in events if e["cat"] in ("cuda_runtime", "cuda_driver")
                        and any(s in e["name"] for s in _LAUNCH) and (not fwd or forward_of(e["ts"]) is not None)) / n_fwd
    syncs = [e for e in host_syncs if not fwd or forward_of(e["ts"]) is not None]
    out = {
        "forwards": n_fwd,
        "kernel_time_us": total / n_fwd,
        "gpu_busy_us": busy_us,
        "gpu_span_us": span_us,
        "gpu_idle_us": max(span_us - busy_us, 0.0),
        "gpu_idle_fraction": (span_us - busy_us) / span_us if span_us > 0 else 0.0,
        "idle_gaps_over_threshold": len(big) / n_fwd,
        "largest_gap_us": max(gaps_all, default=0.0),
        "gap_threshold_us": gap_us,
        "kernels_per_forward": sum(k["calls"] for k in kern.values()) / n_fwd,
        "distinct_kernels": len(kern),
        "launches_per_forward": launches / n_fwd,
        "launch_api_us": launch_api_us,
        "cpu_us_per_forward": cpu_us,
        "cpu_bound": bool(cpu_us is not None and cpu_us > busy_us),
        "syncs_per_forward": len(syncs) / n_fwd,
        "sync_us_per_forward": sum(e["dur"] for e in syncs) / n_fwd,
        "sync_calls": sorted(Counter(e["name"] for e in syncs)),
        "copies": {k: v / n_fwd for k, v in sorted(copies.items())},
        "unattributed_gpu_events": unattributed,
        "top_kernels": top_rows,
        "other_share": (1 - sum(r["share"] for r in top_rows)) if total else 0.0,
        "ops": op_rows[:top],
        "ceilings": {"bandwidth_Bps": bw, "peak_flops": peak, "dtype": dtype},
        "modules": _module_rows(modules or {}, mod_time, ops_by_module(events, op_cost, n_fwd), n_fwd, total, bw, peak, top),
    }
    return out


def label(kernel: str) -> str:
    """A readable short name: the base name, or for generic wrappers (cutlass ``Kernel2<...>``) the
    first template argument's base name.

    >>> label("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x128_8x4_nn_align1>(Params)")
    'cutlass_80_simt_sgemm_128x128_8x4_nn_align1'
    """
    b = base_name(kernel)
    if b in ("Kernel", "Kernel2", "kernel", "device_kernel") and "<" in kernel:
        m = re.match(r"\s*([\w:]+)", kernel.split("<", 1)[1])
        return m.group(1).split("::")[-1] if m else b
    return b


def _short(label: str) -> str:
    return "<root>" if label == FORWARD else label[len(MODULE):] if label.startswith(MODULE) else label


def ops_by_module(events: list[dict], op_cost: dict, n_fwd: int) -> dict:
    """Estimated FLOPs per module range (ops nested inside it, any depth; root included)."""
    mods = [e for e in events if e["cat"] == "user_annotation" and (e["name"].startswith(MODULE) or e["name"] == FORWARD)]
    flops = Counter()
    for op, c in op_cost.values():
        if not c:
            continue
        for m in mods:
            if m["tid"] == op["tid"] and m["ts"] <= op["ts"] <= m["ts"] + m["dur"]:
                flops[m["name"]] += c["flops"] / n_fwd
    return flops


def _module_rows(modules: dict, mod_time: Counter, flops: Counter, n_fwd: int, total: float,
                 bw, peak, top: int) -> list[dict]:
    rows = []
    for label, t in mod_time.most_common(top):
        m = modules.get(label, {})
        r = {"module": _short(label), "type": m.get("type"), "time_us": t / n_fwd,
             "share": t / total if total else 0.0, "flops": flops.get(label, 0.0)}
        if m:
            r["bytes"] = float(m["in_bytes"] + m["out_bytes"] + m["param_bytes"])
            r["in_shapes"], r["out_shapes"] = m["in_shapes"], m["out_shapes"]
            if bw and peak:
                rl = opcost.roofline(r["flops"], r["bytes"], float(bw), float(peak))
                r.update(ceiling_us=rl["ceiling_us"], bound=rl["bound"])
        rows.append(r)
    return rows
