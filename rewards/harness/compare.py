"""Parent-side correctness: candidate outputs (CPU tensors) against reference outputs."""

from __future__ import annotations

import torch

_NARROW = (torch.float32, torch.float16, torch.bfloat16)


def _wide(dtype: torch.dtype) -> torch.dtype:
    """fp32 arithmetic for fp32 and narrower floats (its rounding is far below any tolerance),
    fp64 otherwise (exact for integers)."""
    return torch.float32 if dtype in _NARROW else torch.float64


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
        a, rt = tolerances(r.dtype, atol, rtol)
        of, rf = o.to(_wide(r.dtype)), r.to(_wide(r.dtype))  # whole-tensor ops when the reference is finite
        finite = torch.isfinite(rf)
        if not bool(finite.all()):  # positions where the reference itself is NaN/Inf are not compared
            of, rf = of[finite], rf[finite]
        if not bool(torch.isfinite(of).all()):
            fail(f"output {i} contains NaN or Inf")
            continue
        if not of.numel():
            continue
        diff = (of - rf).abs_()
        mag = rf.abs()
        max_abs = float(diff.max())
        res["max_abs_err"] = max(res["max_abs_err"], max_abs)
        res["max_rel_err"] = max(res["max_rel_err"], float((diff / mag.clamp_min(1e-12)).max()))
        if not bool((diff <= mag.mul_(rt).add_(a)).all()):  # torch.allclose's rule: |o - r| <= atol + rtol |r|
            fail(f"output {i} differs from the reference (max abs err {max_abs:.3g})")
    return res


def zeros_would_pass(refs: list, atol: dict, rtol: dict) -> bool:
    """True when an all-zero output would pass every reference output's tolerance."""
    ok = []
    for r in refs:
        if isinstance(r, torch.Tensor):
            a, rt = tolerances(r.dtype, atol, rtol)
            m = r.to(_wide(r.dtype)).abs()
            ok.append(bool((m <= m * rt + a).all()))  # compare()'s rule with an all-zero output
    return bool(ok) and all(ok)
