"""Parent-side correctness: candidate outputs (CPU tensors) against reference outputs."""

from __future__ import annotations

import torch


def tolerances(dtype: torch.dtype, atol: dict, rtol: dict) -> tuple[float, float]:
    name = str(dtype).replace("torch.", "")
    return float(atol.get(name, atol.get("float32", 1e-4))), float(rtol.get(name, rtol.get("float32", 1e-4)))


def compare(outs: list, refs: list, atol: dict, rtol: dict) -> dict:
    """{ok, error, max_abs_err, max_rel_err} for one trial."""
    res = {"ok": True, "error": None, "max_abs_err": 0.0, "max_rel_err": 0.0}

    def fail(msg):
        res.update(ok=False, error=res["error"] or msg)

    if len(outs) != len(refs):
        fail(f"{len(outs)} outputs where the reference returns {len(refs)}")
        return res
    for i, (o, r) in enumerate(zip(outs, refs, strict=True)):
        if not isinstance(o, torch.Tensor):
            fail(f"output {i} is a {type(o).__name__}, not a tensor")
            continue
        if o.shape != r.shape:
            fail(f"output {i} has shape {tuple(o.shape)}, expected {tuple(r.shape)}")
            continue
        if o.dtype != r.dtype:
            fail(f"output {i} has dtype {o.dtype}, expected {r.dtype}")
            continue
        of, rf = o.double(), r.double()
        finite = torch.isfinite(rf)
        if not torch.isfinite(of[finite]).all():
            fail(f"output {i} contains NaN or Inf")
            continue
        diff = (of - rf).abs()[finite]
        if diff.numel():
            res["max_abs_err"] = max(res["max_abs_err"], float(diff.max()))
            res["max_rel_err"] = max(res["max_rel_err"], float((diff / rf.abs()[finite].clamp_min(1e-12)).max()))
        a, rt = tolerances(r.dtype, atol, rtol)
        if not torch.allclose(of[finite], rf[finite], atol=a, rtol=rt):
            fail(f"output {i} differs from the reference (max abs err {float(diff.max()):.3g})")
    return res


def zeros_would_pass(refs: list, atol: dict, rtol: dict) -> bool:
    """True when an all-zero output would pass every reference output's tolerance."""
    ok = []
    for r in refs:
        if isinstance(r, torch.Tensor):
            a, rt = tolerances(r.dtype, atol, rtol)
            ok.append(torch.allclose(torch.zeros_like(r.double()), r.double(), atol=a, rtol=rt))
    return bool(ok) and all(ok)
