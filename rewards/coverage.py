"""Operator coverage: the reference's heavy ops and what the candidate did with each.

Each heavy-op family in the reference (conv, gemm, attention, norm, softmax, rnn, scan) is
``replaced`` or ``fused`` (custom kernels), ``delegated`` (a library/ATen call from the
extension next to custom kernels: legitimate, partial credit), or ``torch`` (left in torch).
With profiles (`kernels`, `ref_kernels`) the share is weighted by the reference's GPU time
per family; otherwise by op count, and the reason says so.

>>> ref = "import torch.nn as nn\\nclass Model(nn.Module):\\n  def __init__(self):\\n" \\
...       "    super().__init__(); self.fc = nn.Linear(4, 4)\\n  def forward(self, x):\\n" \\
...       "    return self.fc(x).softmax(-1)\\n"
>>> sorted(reference_families(ref).items())
[('gemm', 1), ('softmax', 1)]
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import ops
from .static_cpp import CppReport
from .static_py import PyReport, extract


def reference_families(ref_source: str) -> dict[str, int]:
    """Heavy-op family -> number of sites in Model.__init__/forward (and helpers)."""
    rep = extract(ref_source.replace("class Model(", "class ModelNew(", 1))
    fams: dict[str, int] = {}
    for o in rep.ops:
        if o.kind == "torch_heavy" and o.family:
            fams[o.family] = fams.get(o.family, 0) + 1
    return fams


@dataclass
class Coverage:
    status: dict[str, str] = field(default_factory=dict)  # family -> replaced|fused|delegated|torch
    share: float = float("nan")
    basis: str = "static op count"
    custom_kernels_run: bool = False
    torch_compute: bool = False

    def reason(self) -> str:
        parts = ", ".join(f"{k}: {v}" for k, v in sorted(self.status.items())) or "no heavy ops"
        return f"{parts}; covered share {self.share:.2f} by {self.basis}"


def analyze(ref_source: str, cand: PyReport, cpp: CppReport | None,
            evidence: dict | None = None, delegated_credit: float = 0.5,
            negligible_share: float = 0.2) -> Coverage:
    cov = Coverage()
    ref_fams = reference_families(ref_source)
    called = [o.name for o in cand.ops if o.kind == "ext"]
    kernels, cpp_torch, libs = [], [], []
    if cpp is not None:
        for fn in called:
            k, t, lb = cpp.reachable(cpp.bindings.get(fn, fn))
            kernels += k
            cpp_torch += t
            libs += lb
    kernels += [n for n in called if n in cand.triton_kernels]
    cov.custom_kernels_run = bool(kernels)
    py_heavy = {o.family for o in cand.ops if o.kind == "torch_heavy"}
    cov.torch_compute = bool([o for o in cand.ops if o.kind.startswith("torch")] or cpp_torch)
    cpp_heavy = {c.family for c in cpp_torch if c.family}
    lib_heavy = {c.family for c in libs if c.family} | cpp_heavy
    if not libs and cpp_heavy and not kernels:
        lib_heavy = set()
    claimed: dict[str, int] = {}
    for k in set(kernels):
        for f in ops.families_in_name(k):
            claimed[f] = claimed.get(f, 0) + 1
    fused_names = {k for k in kernels if len(ops.families_in_name(k)) > 1}
    for fam in ref_fams:
        if fam in py_heavy or (fam in cpp_heavy and not kernels):
            cov.status[fam] = "torch"
        elif fam in lib_heavy:
            cov.status[fam] = "delegated"
        elif not kernels:
            cov.status[fam] = "torch"
        else:
            cov.status[fam] = "fused" if any(fam in ops.families_in_name(k)
                                              for k in fused_names) else "replaced"
    credit = {"replaced": 1.0, "fused": 1.0, "delegated": delegated_credit, "torch": 0.0}
    ev = evidence or {}
    ref_k = ev.get("ref_kernels") or []
    weights: dict[str, float] = {}
    for k in ref_k:
        f = ops.kernel_family(str(k.get("name", "")))
        if f and f in cov.status:
            weights[f] = weights.get(f, 0.0) + float(k.get("time_us") or 0.0)
    if weights and sum(weights.values()) > 0:
        cand_k = ev.get("kernels") or []
        for k in cand_k:  # a library kernel of a family the static pass credited: delegated
            f = ops.kernel_family(str(k.get("name", "")))
            if f in cov.status and cov.status[f] in ("replaced", "fused") and \
                    k.get("origin") != "candidate" and float(k.get("time_us") or 0) > 0:
                cov.status[f] = "delegated"
        total = sum(weights.values())
        cov.share = sum(w * credit[cov.status[f]] for f, w in weights.items()) / total
        cov.basis = "reference GPU time"
    elif ref_fams:
        total = sum(ref_fams.values())
        cov.share = sum(n * credit[cov.status[f]] for f, n in ref_fams.items()) / total
        cov.basis = "static op count (no kernel profiles)"
    else:
        cov.share = 1.0 if kernels and not cov.torch_compute else 0.5
        cov.basis = "reference has no heavy ops"
    # the profile outranks the static guess: kernels it saw run count, and kernels that do
    # negligible work (an identity or a copy while torch does the heavy ops) cap the share
    if ev.get("launched_candidate_kernels"):
        cov.custom_kernels_run = True
    gpu_share = ev.get("candidate_kernel_share")
    if isinstance(gpu_share, int | float) and gpu_share == gpu_share and (
            cov.share != cov.share or gpu_share < cov.share) and (
            gpu_share < negligible_share or cov.share != cov.share):
        cov.share = float(gpu_share)
        cov.basis += f"; capped by the profile: candidate kernels are {gpu_share:.0%} of GPU time"
    return cov


def score(cov: Coverage) -> int:
    """1-5 from the covered share.

    >>> [score(Coverage(share=s)) for s in (0.0, 0.2, 0.5, 0.75, 0.95)]
    [1, 2, 3, 4, 5]
    """
    s = cov.share
    if s != s:
        return 3
    return 5 if s >= 0.9 else 4 if s >= 0.7 else 3 if s >= 0.4 else 2 if s >= 0.15 else 1

