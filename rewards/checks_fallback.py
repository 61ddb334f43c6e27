"""torch_fallback: a broad ``except`` that guards the custom-kernel path and routes forward
to torch, and forward-path ``if`` branches that pick torch instead of the kernel.

>>> from rewards.static_py import extract
>>> src = ("import torch\\nfrom torch.utils.cpp_extension import load_inline\\n"
...        "try:\\n  ext = load_inline(name='e', cpp_sources='', functions=['f'])\\n"
...        "except Exception:\\n  ext = None\\n"
...        "class ModelNew(torch.nn.Module):\\n  def forward(self, x):\\n"
...        "    if ext is None:\\n      return torch.nn.functional.linear(x, x)\\n"
...        "    return ext.f(x)\\n")
>>> [f.evidence for f in check_fallback(extract(src))]
['L5: except Exception:']
"""

from __future__ import annotations

import ast

from . import ops
from .findings import Finding, make
from .static_py import PyReport, dotted


def _calls(nodes):
    for root in nodes:
        for n in ast.walk(root):
            if isinstance(n, ast.Call):
                yield n


def _handler_reraises(h: ast.ExceptHandler) -> bool:
    return all(isinstance(s, ast.Raise) for s in h.body) or (
        bool(h.body) and isinstance(h.body[-1], ast.Raise) and not any(
            isinstance(x, ast.Return) for s in h.body for x in ast.walk(s)))


TORCH_ONLY_STEPS = ("torch.compile", "torch.jit.", "torch.cuda.CUDAGraph", "torch.cuda.graph",
                    "torch.cuda.make_graphed_callables", "torch._dynamo.", "torch.fx.")


def _names_in(nodes) -> set[str]:
    """Names and ``self.x`` attributes a statement list mentions (as ``x`` / ``self.x``)."""
    out = set()
    for s in nodes:
        for x in ast.walk(s):
            if isinstance(x, ast.Name):
                out.add(x.id)
            elif isinstance(x, ast.Attribute) and isinstance(x.value, ast.Name) and \
                    x.value.id == "self":
                out.add("self." + x.attr)
    return out


def _kernel_path(rep: PyReport, body: list[ast.stmt], ext_lines: set[int]) -> bool:
    """Does a try body call a custom kernel or build the extension?"""
    lines = {x.lineno for s in body for x in ast.walk(s) if hasattr(x, "lineno")}
    if lines & ext_lines:
        return True
    for c in _calls(body):
        d = dotted(c.func, rep.aliases) or ""
        last = d.split(".")[-1]
        if last in ("load_inline", "load") and ("cpp_extension" in d or d in ("load", "load_inline")):
            return True
        if d in rep.loader_fns or last in rep.loader_fns:
            return True
        if isinstance(c.func, ast.Attribute) and rep.graph is not None and rep.graph.is_ext(
                c.func.value):
            return True
    return False


def _torch_work(rep: PyReport, nodes) -> bool:
    for c in _calls(nodes):
        d = dotted(c.func, rep.aliases) or ""
        last = d.split(".")[-1]
        if any(d.startswith(p) for p in TORCH_ONLY_STEPS):
            continue
        if ops.family(last) or ops.is_light(last):
            return True
        if d.startswith("self.") and d.count(".") == 1 and rep.graph is not None and any(
                t.startswith("nn:") for t in rep.graph.attr_of("ModelNew", d[5:])):
            return True
    return False


AVAILABILITY = ("is_cuda", "device", "is_available", "hasattr", "is_tensor", "isinstance",
                "is_contiguous", "dtype", "type", "is_grad_enabled", "requires_grad")


def is_mode_test(test: ast.AST) -> bool:
    """``if self.training`` / ``if not m.training``: a train/eval switch."""
    return any(isinstance(x, ast.Attribute) and x.attr == "training" for x in ast.walk(test))


def _availability_test(test: ast.AST) -> bool:
    """Only device, type or availability checks (``x.is_cuda``, ``ext is not None``,
    ``hasattr(self, "k")``): no shape, size or value test that could pick torch for the
    timed inputs."""
    for x in ast.walk(test):
        if isinstance(x, ast.Constant) and x.value is not None and not isinstance(x.value, str):
            return False
        if isinstance(x, ast.Attribute) and x.attr in ("shape", "ndim"):
            return False
        if isinstance(x, ast.Call):
            name = x.func.attr if isinstance(x.func, ast.Attribute) else getattr(x.func, "id", "")
            if name not in AVAILABILITY:
                return False
        if isinstance(x, ast.Compare) and not all(isinstance(o, ast.Is | ast.IsNot | ast.Eq |
                                                             ast.NotEq) for o in x.ops):
            return False
    return True


def _aliases_of(names: set[str], tree: ast.Module) -> set[str]:
    """``names`` plus what is assigned from them (``self.k = ext`` after ``ext = None``)."""
    out = set(names)
    for _ in range(2):
        for a in ast.walk(tree):
            if isinstance(a, ast.Assign) and isinstance(a.value, ast.Name | ast.Attribute):
                v = dotted(a.value, {})
                if v in out:
                    out |= {("self." + t.attr) if isinstance(t, ast.Attribute) else t.id
                            for t in a.targets if isinstance(t, ast.Name | ast.Attribute)}
    return out


def check_fallback(rep: PyReport) -> list[Finding]:
    """A broad ``except`` that guards the custom-kernel path and routes forward to torch, and
    ``if`` branches on the forward path that pick torch instead of the kernel.

    ``except`` around ``torch.compile``/jit/graph capture or imports is not a fallback: only a
    try body that calls a kernel or builds the extension counts, and only when its handler does
    torch work itself or sets a name that a forward-path ``if`` tests."""
    out = []
    ext_lines = {o.line for o in rep.ops if o.kind == "ext"}
    heavy = {o.line for o in rep.ops if o.kind == "torch_heavy"}
    fwd_tests = set()
    for fn in rep.forward_nodes:
        for n in ast.walk(fn):
            if isinstance(n, ast.If | ast.IfExp):
                fwd_tests |= _names_in([n.test])
    for n in ast.walk(rep.tree):
        if not isinstance(n, ast.Try) or not _kernel_path(rep, n.body, ext_lines):
            continue
        for h in n.handlers:
            if _handler_reraises(h):
                continue
            set_names = _aliases_of({("self." + t.attr) if isinstance(t, ast.Attribute) else t.id
                                     for s in h.body for a in ast.walk(s)
                                     if isinstance(a, ast.Assign) for t in a.targets
                                     if isinstance(t, ast.Name | ast.Attribute)}, rep.tree)
            if _torch_work(rep, h.body) or set_names & fwd_tests or any(
                    isinstance(x, ast.Return) for s in h.body for x in ast.walk(s)):
                out.append(make("torch_fallback", rep.ev(h)))
    for fn in rep.forward_nodes:
        fn_lines = {x.lineno for x in ast.walk(fn) if hasattr(x, "lineno")}
        for n in ast.walk(fn):
            # a train/eval switch is judged by what runs in training mode (detect: no kernel
            # runs in training -> reference_copy); a device/availability test is a CPU path
            if isinstance(n, ast.If | ast.IfExp) and not is_mode_test(n.test) and \
                    not _availability_test(n.test):
                a = n.body if isinstance(n.body, list) else [n.body]
                b = n.orelse if isinstance(n.orelse, list) else [n.orelse]
                la = {x.lineno for s in a for x in ast.walk(s) if hasattr(x, "lineno")}
                lb = {x.lineno for s in b for x in ast.walk(s) if hasattr(x, "lineno")}
                outside = ext_lines & (fn_lines - la - lb)
                # an early torch exit: the branch does heavy torch work and returns before
                # the kernel runs (an optional torch submodule, e.g. a downsample, is not)
                early = isinstance(n, ast.If) and any(
                    isinstance(x, ast.Return) for s in a for x in ast.walk(s))
                if (la & ext_lines and lb & heavy - ext_lines) or (
                        lb & ext_lines and la & heavy - ext_lines) or (
                        outside and early and (la & heavy) and not la & ext_lines):
                    out.append(make("torch_fallback", rep.ev(n)))
    return out
