"""Structured Verifier feedback from a harness result. Pure functions over ``EvalResult`` dicts.

The feedback is a dict: ``status``, ``summary`` (one line), and per case
``compile_errors`` (file, line, message, fix), ``correctness`` (which output, max abs/rel
error), ``bottleneck`` (the dominating kernels, host-side costs, memory or compute bound),
``hints`` (actionable sentences) and optionally ``guidance`` (LLM-written).
"""

from __future__ import annotations

import re
from typing import Any

from agents import profile_feedback

# g++/clang: "main.cpp:12:5: error: ..."; nvcc: "kernel.cu(12): error: ..."
_GCC = re.compile(r"^(?P<file>[^\s:]+):(?P<line>\d+):(?:(?P<col>\d+):)?\s*(?:fatal )?error:\s*(?P<msg>.+)$")
_NVCC = re.compile(r"^(?P<file>[^\s(]+)\((?P<line>\d+)\):\s*(?:catastrophic )?error:\s*(?P<msg>.+)$")
_LINK = re.compile(r"undefined (?:symbol|reference to)[:\s]*`?(?P<sym>[^'\s]+)")

# (pattern in the message, explanation of the fix)
FIXES: list[tuple[str, str]] = [
    (r"expected [‘'\"]?[;,][’'\"]? (?:or [‘'\"]?;[’'\"]? )?before|expected ';'", "a statement is missing its ';' just before the reported line"),
    (r"was not declared in this scope|is undefined|undeclared identifier",
     "the name is used before it is declared: declare or include it, or fix the spelling"),
    (r"no matching function for call|no instance of overloaded function",
     "the arguments' types do not match any overload: check the signature and cast the arguments"),
    (r"cannot convert|invalid conversion|a value of type .* cannot be",
     "a value has the wrong type: add an explicit cast or change the declared type"),
    (r"has no member named|has no member",
     "the member does not exist on that type: check the API (e.g. data_ptr<float>(), size(0))"),
    (r"redefinition of|has already been defined",
     "the same function is defined twice: keep one definition, declare it in cpp_sources only"),
    (r"too few arguments|too many arguments", "the call passes the wrong number of arguments"),
    (r"No such file or directory|cannot open source file",
     "an #include names a header that is not there: remove it or use the standard header"),
    (r"expected .* before|expected an expression|expected a",
     "the syntax is broken near the reported line: check brackets, parentheses and templates"),
    (r"__global__ function call must be configured",
     "a kernel is called without <<<grid, block>>> launch configuration"),
    (r"calling a __host__ function .* from a __global__|calling a host function",
     "device code calls a host-only function: use a __device__ function or CUDA math intrinsic"),
]


def explain(message: str) -> str:
    for pat, fix in FIXES:
        if re.search(pat, message):
            return fix
    return "read the compiler message at that line and correct the code there"


def parse_compile_errors(log: str, limit: int = 8) -> list[dict[str, Any]]:
    """Compiler error lines (g++ and nvcc formats, plus undefined symbols), each with a fix."""
    out: list[dict[str, Any]] = []
    seen = set()
    for raw in (log or "").splitlines():
        line = raw.strip()
        m = _GCC.match(line) or _NVCC.match(line)
        if m:
            key = (m["file"], m["line"], m["msg"])
            if key in seen:
                continue
            seen.add(key)
            out.append({"file": m["file"].rsplit("/", 1)[-1], "line": int(m["line"]),
                        "message": m["msg"].strip(), "fix": explain(m["msg"])})
        elif (lm := _LINK.search(line)) and ("link", lm["sym"]) not in seen:
            seen.add(("link", lm["sym"]))
            out.append({"file": None, "line": None, "message": line,
                        "fix": f"the symbol {lm['sym']} is declared but never defined: define it "
                               "or fix the declaration's signature"})
        if len(out) >= limit:
            break
    return out


_OUTPUT = re.compile(r"output\s*(?:\[|#|index\s*)?(\d+)", re.I)


def correctness(result: dict[str, Any]) -> dict[str, Any]:
    err = result.get("error") or ""
    m = _OUTPUT.search(err)
    out = {"output": int(m.group(1)) if m else None,
           "max_abs_err": result.get("max_abs_err"), "max_rel_err": result.get("max_rel_err"),
           "detail": err.strip().splitlines()[0][:300] if err.strip() else None}
    ev = result.get("evidence") or {}
    flags = [k for k in ("zeros_would_pass", "constant_output", "input_mutated",
                         "output_aliases_input", "spot_check_failed") if ev.get(k)]
    if flags:
        out["flags"] = flags
    return out


def bottleneck(result: dict[str, Any], top: int = 3) -> dict[str, Any] | None:
    ev = result.get("evidence") or {}
    kernels = sorted(ev.get("kernels") or [], key=lambda k: -(k.get("time_us") or 0))
    total = sum(k.get("time_us") or 0 for k in kernels)
    out: dict[str, Any] = {}
    if kernels and total > 0:
        out["top_kernels"] = [{"name": k.get("name"), "share": round((k.get("time_us") or 0) / total, 3),
                               "origin": k.get("origin"), "calls": k.get("calls")}
                              for k in kernels[:top]]
    for key in ("launches_per_call", "candidate_kernel_share", "decoy_kernels"):
        if ev.get(key) not in (None, [], 0):
            out[key] = ev[key]
    mc = ev.get("memcpy") or {}
    if mc.get("h2d_count") or mc.get("d2h_count"):
        out["host_copies"] = {k: mc.get(k) for k in ("h2d_count", "d2h_count")}
    floor, rt = ev.get("physical_floor_us"), result.get("runtime_us")
    if floor and rt:
        out["fraction_of_floor"] = round(floor / rt, 4)
    if ev.get("ref_flops") and ev.get("ref_bytes"):
        intensity = ev["ref_flops"] / max(ev["ref_bytes"], 1.0)
        out["bound"] = "compute" if intensity > 100 else "memory"
        out["arithmetic_intensity"] = round(intensity, 2)
    return out or None


def make_feedback(result: dict[str, Any], target_speedup: float = 1.0) -> dict[str, Any]:
    status = result.get("status", "invalid")
    fb: dict[str, Any] = {"status": status, "hints": []}
    hints = fb["hints"]
    if status == "compile_error":
        errs = parse_compile_errors((result.get("log_tail") or "") + "\n" + (result.get("error") or ""))
        fb["compile_errors"] = errs
        fb["summary"] = (f"the build failed with {len(errs)} error(s)" if errs
                         else "the build failed: " + (result.get("error") or "see log")[:200])
        hints += [f"{e['file'] or 'link'}:{e['line'] or '-'}: {e['message']} -> fix: {e['fix']}"
                  for e in errs]
    elif status == "incorrect":
        c = fb["correctness"] = correctness(result)
        where = f"output {c['output']}" if c["output"] is not None else "the output"
        fb["summary"] = (f"{where} is wrong: max abs error {c['max_abs_err']}, "
                         f"max rel error {c['max_rel_err']}")
        hints.append("compare your kernel's math with the reference op by op; check indexing, "
                     "reductions and the order of parameters")
        if "zeros_would_pass" in c.get("flags", []):
            hints.append("the tolerance is loose for this task: a correct program must still "
                         "compute the real values")
    elif status in ("runtime_error", "crashed", "timeout"):
        fb["summary"] = f"{status.replace('_', ' ')}: " + (result.get("error") or "no message")[:300]
        hints.append("the program built but failed while running: check shapes, device "
                     "placement, out-of-bounds indexing and launch configuration")
    elif status == "invalid":
        fb["summary"] = "no usable program: " + (result.get("error") or "invalid candidate")[:300]
        hints.append("answer with one complete ```python block that defines class ModelNew")
    else:
        s = result.get("speedup")
        fb["summary"] = f"correct, {s:.2f}x vs eager" if s is not None else "correct"
        prof = profile_feedback.diagnose(result.get("evidence") or {}, result.get("runtime_us"))
        if prof:  # the two-level profile: the data record, and its text leads the hints
            fb["profile"] = prof
            hints.append(profile_feedback.render(prof))
        b = bottleneck(result)
        if b:
            fb["bottleneck"] = b
            if b.get("top_kernels") and not prof:
                k = b["top_kernels"][0]
                hints.append(f"{k['name']} takes {k['share']:.0%} of GPU time: optimize or fuse it first")
            if b.get("decoy_kernels"):
                hints.append(f"kernels {b['decoy_kernels']} are compiled but never run")
            if b.get("host_copies"):
                hints.append("host-device copies happen in every call: keep data on the device")
        if s is not None and s < target_speedup:
            hints.append(f"below the target of {target_speedup:.2f}x: fuse elementwise ops into "
                         "the heavy kernels and cut launches")
    return fb


def render_feedback(fb: dict[str, Any]) -> str:
    lines = [f"status: {fb['status']}", f"summary: {fb.get('summary', '')}"]
    if fb.get("bottleneck"):
        lines.append(f"profile: {fb['bottleneck']}")
    lines += [f"- {h}" for h in fb.get("hints", [])]
    if fb.get("guidance"):
        lines.append(f"guidance: {fb['guidance']}")
    return "\n".join(lines)


def profile_text(result: dict[str, Any] | None, top: int = 5) -> str:
    """The reference's system-level profile, from a result's evidence (for the Planner)."""
    ev = (result or {}).get("evidence") or {}
    text = profile_feedback.render_reference({"ref_runtime_us": (result or {}).get("ref_runtime_us"),
                                              "system": ev.get("ref_system_profile"),
                                              "kernel": ev.get("ref_kernel_profile")}, top)
    if text:
        return text
    ks = sorted(ev.get("ref_kernels") or [], key=lambda k: -(k.get("time_us") or 0))
    if not ks:
        return "not available (no GPU profile yet)"
    total = sum(k.get("time_us") or 0 for k in ks) or 1.0
    lines = [f"- {k.get('name')}: {(k.get('time_us') or 0) / total:.0%} of GPU time, "
             f"{k.get('calls')} call(s)" for k in ks[:top]]
    if result.get("ref_runtime_us"):
        lines.insert(0, f"eager runtime {result['ref_runtime_us']:.1f} us per forward")
    return "\n".join(lines)
