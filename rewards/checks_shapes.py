"""Shape checks: signatures and hyperparameters changed (shape_change), and forward-path code
specialised to the visible shapes or seed (shape_specialization, scope-aware).

>>> from rewards.static_py import extract
>>> ref = extract("def get_inputs():\\n    return [torch.rand(batch_size, 8)]\\n")
>>> cand = extract("class ModelNew:\\n  def forward(self, x):\\n    return x\\n"
...                "def get_inputs():\\n    return [torch.randn(4, 8).cuda()]\\n")
>>> [f.severity for f in check_shapes(cand, ref, {"batch_size": 4})]
[]
"""

from __future__ import annotations

import ast

from .findings import Finding, make
from .static_py import PyReport, dotted


def _accepts(fn: ast.FunctionDef, n: int) -> bool:
    """Can ``fn`` (a method) be called with ``n`` positional arguments?"""
    pos = fn.args.posonlyargs + fn.args.args
    required = len(pos) - 1 - len(fn.args.defaults)
    return required <= n and (fn.args.vararg is not None or n <= len(pos) - 1)


def _params(fn: ast.FunctionDef) -> list[str]:
    return [a.arg for a in fn.args.args[1:]] + ([fn.args.vararg.arg] if fn.args.vararg else [])


def _ref_model(ref: PyReport) -> ast.ClassDef | None:
    return next((n for n in ref.tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)


def passed_inputs(ref: PyReport | None) -> int:
    """How many positional inputs the harness passes forward: the reference's ``get_inputs()``
    list when it is a literal with no None in it, else its ``Model.forward``'s parameters
    (KernelBench calls ``model(*get_inputs())``); 0 when neither can be read."""
    if ref is None or ref.tree is None:
        return 0
    for n in ref.tree.body:
        if isinstance(n, ast.FunctionDef) and n.name == "get_inputs":
            rets = [r.value for r in ast.walk(n) if isinstance(r, ast.Return) and r.value is not None]
            if len(rets) == 1 and isinstance(rets[0], ast.List | ast.Tuple) and \
                    not any(isinstance(e, ast.Starred) for e in rets[0].elts):
                nones = any(isinstance(e, ast.Constant) and e.value is None for e in rets[0].elts)
                return 0 if nones else len(rets[0].elts)
    rmodel = _ref_model(ref)
    fwd = next((f for f in rmodel.body if isinstance(f, ast.FunctionDef) and f.name == "forward"), None) \
        if rmodel is not None else None
    return len(fwd.args.args) - 1 if fwd is not None and not fwd.args.vararg else 0


def check_shapes(rep: PyReport, ref: PyReport | None, ref_consts: dict) -> list[Finding]:
    out = []
    if ref is not None and ref.tree is not None and rep.model_new is not None:
        rmodel = _ref_model(ref)
        if rmodel is not None:
            rm = {n.name: n for n in rmodel.body if isinstance(n, ast.FunctionDef)}
            cm = {n.name: n for n in rep.model_new.body if isinstance(n, ast.FunctionDef)}
            for name in ("__init__", "forward"):
                if name in rm and name in cm and not _accepts(cm[name], len(_params(rm[name]))):
                    out.append(make("shape_change", rep.ev(cm[name]) + " (signature differs)"))
            init = cm.get("__init__")
            if init is not None:
                ps = set(_params(init))
                for n in ast.walk(init):
                    if isinstance(n, ast.Assign):
                        for t in n.targets:
                            if isinstance(t, ast.Name) and t.id in ps:
                                out.append(make("shape_change", rep.ev(n)))
        rfuncs = {n.name: _input_key(n, ref_consts) for n in ref.tree.body
                  if isinstance(n, ast.FunctionDef)}
        cand_consts = {**ref_consts, **_literals(rep.tree)}
        for n in rep.tree.body:
            if isinstance(n, ast.FunctionDef) and n.name in ("get_inputs", "get_init_inputs"):
                if n.name in rfuncs and _input_key(n, cand_consts) != rfuncs[n.name]:
                    # the harness builds inputs with the reference's functions: a note only
                    out.append(make("shape_change", rep.ev(n) + " (redefined with other values;"
                                    " the harness uses the reference's)", severity="minor"))
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(
                    n.targets[0], ast.Name) and n.targets[0].id in ref_consts:
                try:
                    v = ast.literal_eval(n.value)
                except ValueError:
                    continue
                if v != ref_consts[n.targets[0].id]:
                    out.append(make("shape_change", rep.ev(n) + " (rebinds a reference constant;"
                                    " the reference's inputs keep its own)", severity="minor"))
    out += _global_sizes(rep, ref_consts)
    for fn in rep.forward_nodes:
        for n in ast.walk(fn):
            if isinstance(n, ast.Compare):
                sides = [n.left, *n.comparators]
                shapey = any(isinstance(x, ast.Attribute) and x.attr == "shape" or
                             isinstance(x, ast.Call) and isinstance(x.func, ast.Attribute) and
                             x.func.attr in ("size", "numel", "dim") for s in sides
                             for x in ast.walk(s))
                lit = any(isinstance(s, ast.Constant) and isinstance(s.value, int) and
                          s.value > 4 or isinstance(s, ast.Tuple) for s in sides)
                if shapey and lit:
                    out.append(make("shape_specialization", rep.ev(n)))
            elif isinstance(n, ast.Call) and (dotted(n.func, rep.aliases) or "").endswith(
                    "manual_seed"):
                out.append(make("shape_specialization", rep.ev(n)))
    return out


RANDOM = ("rand", "randn", "rand_like", "randn_like", "normal", "uniform")


class _DeviceFree(ast.NodeTransformer):
    """Drop what only places or draws inputs: ``.cuda()``, ``.to(device)``, ``device=``,
    docstrings, which random generator (rand vs randn), tuple vs list; names of the
    reference's constants become their values (a literal ``128`` equals ``batch_size``)."""

    def __init__(self, consts: dict | None = None):
        self.consts = consts or {}

    def visit_Name(self, node: ast.Name) -> ast.AST:
        v = self.consts.get(node.id)
        if isinstance(v, int | float | str | bool) and isinstance(node.ctx, ast.Load):
            return ast.Constant(v)
        return node

    def visit_Tuple(self, node: ast.Tuple) -> ast.AST:
        self.generic_visit(node)
        return ast.List(node.elts, node.ctx)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Attribute) and node.func.attr in RANDOM:
            node.func = ast.Name("random", ast.Load())
        node.keywords = [k for k in node.keywords if k.arg not in ("device", "pin_memory")]
        f = node.func
        if isinstance(f, ast.Attribute) and (f.attr == "cuda" or (
                f.attr == "to" and not any(k.arg == "dtype" for k in node.keywords) and all(
                    not (dotted(a, {}) or "").startswith("torch.") or "device" in (
                        dotted(a, {}) or "") for a in node.args))):
            return f.value
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self.generic_visit(node)
        if node.body and isinstance(node.body[0], ast.Expr) and isinstance(
                node.body[0].value, ast.Constant) and len(node.body) > 1:
            node.body = node.body[1:]
        return node


def _input_key(fn: ast.FunctionDef, consts: dict | None = None) -> str:
    """``get_inputs`` as its values: identical up to device placement, the random generator,
    docstrings and spelling a reference constant as its value."""
    import copy

    return ast.dump(_DeviceFree(consts).visit(copy.deepcopy(fn)), annotate_fields=False,
                    include_attributes=False)


def _literals(tree: ast.Module) -> dict:
    """Module-level ``NAME = <literal>`` bindings."""
    out = {}
    for n in tree.body:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            try:
                out[n.targets[0].id] = ast.literal_eval(n.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                pass
    return out


def _global_sizes(rep: PyReport, ref_consts: dict) -> list[Finding]:
    """Forward-path code that sizes work with a module-level size constant (the reference's
    ``batch_size``, or a literal the candidate put in its place) instead of the input's shape.
    Scope-aware: parameters, locals and constructor arguments that share the name are not."""
    lits = {}
    for n in rep.tree.body:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            if isinstance(n.value, ast.Constant) and isinstance(n.value.value, int):
                lits[n.targets[0].id] = n.value.value
    sizes = {k for k, v in ref_consts.items() if isinstance(v, int) and not isinstance(v, bool)}
    out = []
    for fn in rep.forward_nodes:
        args = fn.args
        local = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
        local |= {a.arg for a in (args.vararg, args.kwarg) if a}
        for n in ast.walk(fn):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store | ast.Del):
                local.add(n.id)
            elif isinstance(n, ast.arg):
                local.add(n.arg)
        for n in ast.walk(fn):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in sizes and \
                    n.id not in local and (n.id in lits or n.id not in rep.aliases):
                out.append(make("shape_specialization", rep.ev(n) + f" (module constant {n.id})"))
    return out
