"""Which GPU kernels a candidate declared, and which ran (from a torch.profiler trace).

Declared kernels come from a token-level scan of the CUDA sources actually passed to
load_inline (comments and string literals removed first, so a ``__global__`` in a comment
does not count). A profiled kernel is ``candidate`` when its base name (namespace, template
arguments and parameter list stripped) is a declared kernel, otherwise ``library``.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict

_TOKENS = re.compile(r"""//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|[A-Za-z_]\w*|\S""", re.S)
_SKIP = {"__launch_bounds__", "__attribute__", "__declspec", "alignas"}
MARKER_KERNEL = "spin_kernel"  # torch.cuda._sleep marks the timed stream in the trace
JOIN_SLACK_US = 0.5  # clock granularity when a joined side stream ends as the timed one resumes


def declared_kernels(sources: list[str]) -> list[str]:
    """
    >>> declared_kernels(['// __global__ void fake(int)\\n__global__ void __launch_bounds__(256) k1(float* x) {}\\n'
    ...                   'template <int B> __global__ void k2(int n) {}'])
    ['k1', 'k2']
    """
    names: list[str] = []
    for src in sources:
        toks = [t for t in _TOKENS.findall(src) if not t.startswith(("//", "/*", '"', "'"))]
        for i, t in enumerate(toks):
            if t != "__global__":
                continue
            j, depth = i + 1, 0
            while j < len(toks) - 1:
                tok = toks[j]
                if tok in _SKIP and toks[j + 1] == "(":  # skip its parenthesised arguments
                    j += 2
                    depth = 1
                    while j < len(toks) and depth:
                        depth += {"(": 1, ")": -1}.get(toks[j], 0)
                        j += 1
                    continue
                if re.match(r"[A-Za-z_]\w*$", tok) and toks[j + 1] == "(":
                    if tok not in names:
                        names.append(tok)
                    break
                if tok in "{;":
                    break
                j += 1
    return names


def base_name(kernel: str) -> str:
    """
    >>> base_name('void ns::my_kernel<256, float>(float const*, int)')
    'my_kernel'
    """
    s = kernel.strip()
    s = re.sub(r"^void\s+", "", s)
    cut = len(s)
    for i, ch in enumerate(s):  # first '(' or '<' at top level ends the qualified name
        if ch in "(<":
            cut = i
            break
    return s[:cut].split("::")[-1].strip()


def bracketed_calls(model, xs: list, calls: int) -> None:
    """The profiled forwards, each bracketed by a marker kernel on the timed (current) stream
    and followed by a device sync: the layout ``hidden_work`` reads. Every profiler run that
    feeds it must go through here (an unbracketed trace flags every other stream)."""
    import torch

    for _ in range(calls):
        torch.cuda._sleep(1000)
        model(*xs)
        torch.cuda._sleep(1000)  # starts when the timed stream has finished the call
        torch.cuda.synchronize()  # nothing of this call spills into the next bracket


def hidden_work(events: list[dict]) -> tuple[int | None, list[dict]]:
    """GPU work that escaped the timed stream: (timed stream, escaped kernels/copies).

    The profiled loop brackets each forward with a marker kernel on the current (timed) stream
    before and after it, then synchronizes the device. Work on another stream that started in
    a call's bracket and ends after that call's closing marker began was not waited for by the
    timed stream, so CUDA events there would not have covered it. A side stream joined back
    (``current_stream().wait_stream(s)``, an event wait, a blocking stream against the legacy
    default stream) makes the closing marker wait for it, so it is not reported.
    """
    marks = sorted((e for e in events if e.get("cat") == "kernel" and MARKER_KERNEL in e.get("name", "")),
                   key=lambda e: float(e.get("ts", 0)))
    if not marks:
        return None, []
    timed = (marks[0].get("args") or {}).get("stream")
    pairs = [(float(marks[i]["ts"]), float(marks[i + 1]["ts"])) for i in range(0, len(marks) - 1, 2)]
    hidden = []
    for e in events:
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset") or MARKER_KERNEL in e.get("name", ""):
            continue
        if (e.get("args") or {}).get("stream") == timed:
            continue
        if len(marks) % 2:  # not bracketed (an older trace layout): any other stream counts
            hidden.append(e)
            continue
        ts, end = float(e.get("ts", 0)), float(e.get("ts", 0)) + float(e.get("dur", 0))
        call = [c for c in pairs if c[0] <= ts]
        if call and end > call[-1][1] + JOIN_SLACK_US:
            hidden.append(e)
    return timed, hidden


def summarize_trace(path: str, declared: list[str], calls: int) -> dict:
    """Evidence keys from a chrome trace of ``calls`` profiled forwards."""
    with open(path) as f:
        events = json.load(f).get("traceEvents", [])
    return summarize_events(events, declared, calls)


def summarize_events(events: list[dict], declared: list[str], calls: int) -> dict:
    kernels: dict[str, dict] = {}
    timed_streams, streams = set(), set()
    memcpy = defaultdict(float)
    for e in events:
        cat, name, args = e.get("cat", ""), e.get("name", ""), e.get("args", {}) or {}
        if cat == "kernel":
            stream = args.get("stream")
            if MARKER_KERNEL in name:
                timed_streams.add(stream)
                continue
            streams.add(stream)
            k = kernels.setdefault(name, {"name": name, "time_us": 0.0, "calls": 0,
                                          "origin": "candidate" if base_name(name) in declared else "library"})
            k["time_us"] += float(e.get("dur", 0.0))
            k["calls"] += 1
        elif cat == "gpu_memcpy":
            kind = "h2d" if "HtoD" in name else "d2h" if "DtoH" in name else "d2d"
            memcpy[f"{kind}_count"] += 1
            memcpy[f"{kind}_bytes"] += float(args.get("bytes", 0) or 0)
    ks = sorted(kernels.values(), key=lambda k: -k["time_us"])
    for k in ks:
        k["time_us"] /= calls
        k["calls"] = k["calls"] / calls
    total = sum(k["time_us"] for k in ks)
    cand = sum(k["time_us"] for k in ks if k["origin"] == "candidate")
    launched = sorted({base_name(k["name"]) for k in ks if k["origin"] == "candidate"})
    out = {
        "kernels": ks,
        "launched_candidate_kernels": launched,
        "decoy_kernels": [d for d in declared if d not in launched],
        "candidate_kernel_share": (cand / total) if total > 0 else 0.0,
        "launches_per_call": sum(k["calls"] for k in ks),
        "memcpy": {f"{a}_{b}": memcpy[f"{a}_{b}"] / calls
                   for a in ("h2d", "d2h", "d2d") for b in ("count", "bytes")},
        "streams": sorted(s for s in streams if s is not None),
    }
    if timed_streams:
        timed, hidden = hidden_work(events)
        out["timed_stream"] = timed
        out["side_stream"] = bool(hidden)  # work the timer's events did not wait for
        out["hidden_kernels"] = sorted({base_name(e.get("name", "")) for e in hidden})
        out["hidden_us"] = sum(float(e.get("dur", 0)) for e in hidden) / calls
        out["side_streams_joined"] = bool(streams - timed_streams) and not hidden
    return out
