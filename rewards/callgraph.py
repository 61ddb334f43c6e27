"""Call graph of a candidate: everything `ModelNew.forward` reaches, and what each call is.

Real solutions rarely call their kernels from ``ModelNew.forward`` itself: they call them from
the ``forward`` of a small module the program defines (held in an attribute, an
``nn.Sequential``/``ModuleList``/``ModuleDict``, built in a loop or a comprehension), from an
``autograd.Function`` through ``.apply``, or from helper functions. This walker follows those
edges and sorts each call into an extension call, torch compute (heavy or light) or incidental.

>>> src = '''
... import torch, torch.nn as nn
... from torch.utils.cpp_extension import load_inline
... def build():
...     return load_inline(name="e", cpp_sources="", functions=["relu_fwd"])
... class Block(nn.Module):
...     def __init__(self, ext):
...         super().__init__(); self.fc = nn.Linear(4, 4); self.ext = build()
...     def forward(self, x):
...         return self.ext.relu_fwd(self.fc(x))
... class ModelNew(nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.layers = nn.Sequential(*[Block(None) for _ in range(3)])
...     def forward(self, x):
...         return self.layers(x)
... '''
>>> from rewards.static_py import extract
>>> sorted((o.name, o.kind) for o in extract(src).ops)
[('Linear', 'torch_heavy'), ('relu_fwd', 'ext')]
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from . import ops

if TYPE_CHECKING:
    from .static_py import PyReport

CONTAINERS = ("Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict")
TORCH_NONCOMPUTE = ("torch.cuda.", "torch.backends.", "torch.utils.", "torch.autograd.",
                    "torch.jit.", "torch.library.", "torch._C.", "torch.Size", "torch.no_grad",
                    "torch.manual_seed", "torch.device", "torch.dtype", "torch.is_tensor",
                    "torch.compile", "torch._dynamo.", "torch.fx.")
# iteration wrappers whose elements are the wrapped container's elements
# calls that return (a compiled form of) their first argument
WRAPPERS = ("torch.compile", "torch.jit.script", "torch.jit.trace", "torch.jit.freeze",
            "torch.jit.optimize_for_inference", "functools.partial", "torch.cuda.make_graphed_callables")
ITER_WRAPPERS = ("enumerate", "zip", "reversed", "list", "tuple", "iter", "sorted")
ITER_METHODS = ("items", "values", "children", "modules", "named_children", "keys")


def _dotted(node, aliases):
    from .static_py import dotted

    return dotted(node, aliases)


def _self_attr(e: ast.AST) -> str | None:
    """``self.x`` -> ``x`` (also ``self.x[i]``, ``self.x.items()``, ``enumerate(self.x)``)."""
    while True:
        if isinstance(e, ast.Subscript):
            e = e.value
        elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and \
                e.func.attr in ITER_METHODS:
            e = e.func.value
        elif isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and \
                e.func.id in ITER_WRAPPERS and e.args:
            e = e.args[-1] if e.func.id == "enumerate" else e.args[0]
        else:
            break
    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
        return e.attr
    return None


class Graph:
    """Classes, functions and module-attribute types of one program."""

    def __init__(self, rep: PyReport):
        self.rep, self.al = rep, rep.aliases
        tree = rep.tree
        self.classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        methods = {id(m) for c in self.classes.values() for m in c.body}
        self.funcs = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                      and id(n) not in methods}
        self.ext_globals = {n for n in rep.ext_names if not n.startswith("self.")}
        self.ext_attrs = {n[5:] for n in rep.ext_names if n.startswith("self.")}
        # module-level aliases of .apply: fused = FusedFn.apply
        self.apply_alias: dict[str, str] = {}
        for n in ast.walk(tree):
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Attribute) and \
                    n.value.attr == "apply" and isinstance(n.value.value, ast.Name) and \
                    n.value.value.id in self.classes:
                for t in n.targets:
                    key = t.id if isinstance(t, ast.Name) else (
                        "self." + t.attr if isinstance(t, ast.Attribute) else None)
                    if key:
                        self.apply_alias[key] = n.value.value.id
        self.attr_types: dict[tuple[str, str], set[str]] = {}
        self._busy: set[tuple[int, str | None]] = set()
        for _ in range(2):  # a second pass sees attributes that depend on other attributes
            for cname, cls in self.classes.items():
                for m in cls.body:
                    if isinstance(m, ast.FunctionDef):
                        self._collect_attrs(cname, m)
            self._bind_ctor_args()

    # ---- types: "cls:K", "nn:X", "fn:f", "meth:K.m", "ext", "extfn:f", "apply:K" ---------------
    def types(self, e: ast.AST, env: dict[str, set[str]], depth: int = 0) -> set[str]:
        if e is None or depth > 6:
            return set()
        t = lambda x: self.types(x, env, depth + 1)  # noqa: E731
        if isinstance(e, ast.Call):
            d = _dotted(e.func, self.al) or ""
            last = d.split(".")[-1]
            if isinstance(e.func, ast.Name) and e.func.id in self.classes:
                return {"cls:" + e.func.id}
            if last in CONTAINERS:
                out: set[str] = set()
                for a in [*e.args, *(k.value for k in e.keywords)]:
                    out |= t(a)
                return out
            if d.startswith("torch.nn.") and last[:1].isupper():
                return {"nn:" + last}
            callee = None  # a helper or self.method that builds and returns modules
            if isinstance(e.func, ast.Name) and e.func.id in self.funcs:
                callee = (None, self.funcs[e.func.id])
            elif isinstance(e.func, ast.Attribute) and isinstance(e.func.value, ast.Name) and \
                    e.func.value.id == "self" and env.get(" cls"):
                callee = self.method(next(iter(env[" cls"])), e.func.attr)
            if callee is not None:
                c, fn = callee
                bound = {p.arg: t(a) for p, a in zip(
                    [p for p in fn.args.args if p.arg != "self"], e.args, strict=False)}
                bound.update({k.arg: t(k.value) for k in e.keywords if k.arg})
                fenv = self._local_env(fn, c, {k: v for k, v in bound.items() if v})
                out = set()
                for r in ast.walk(fn):
                    if isinstance(r, ast.Return) and r.value is not None:
                        out |= self.types(r.value, fenv, depth + 1)
                return out
            fty = t(e.func) if isinstance(e.func, ast.Name) else set()
            if any(x.startswith("cls:") for x in fty):  # block = SomeBlock; block(...)
                return {x for x in fty if x.startswith("cls:")}
            if d in WRAPPERS and e.args:
                return t(e.args[0])
            if d == "getattr" and len(e.args) >= 2 and self.is_ext(e.args[0], env):
                return {"extfn:" + (e.args[1].value if isinstance(e.args[1], ast.Constant)
                                    else "*")}
            return set()
        if isinstance(e, ast.Starred):
            return t(e.value)
        if isinstance(e, ast.List | ast.Tuple | ast.Set):
            return set().union(*(t(x) for x in e.elts)) if e.elts else set()
        if isinstance(e, ast.ListComp | ast.GeneratorExp | ast.SetComp):
            return t(e.elt)
        if isinstance(e, ast.Dict):
            return set().union(*(t(x) for x in e.values)) if e.values else set()
        if isinstance(e, ast.DictComp):
            return t(e.value)
        if isinstance(e, ast.IfExp):
            return t(e.body) | t(e.orelse)
        if isinstance(e, ast.BoolOp):
            return set().union(*(t(x) for x in e.values))
        if isinstance(e, ast.Name):
            if e.id in env:
                return env[e.id]
            if e.id in self.ext_globals:
                return {"ext"}
            if e.id in self.funcs:
                return {"fn:" + e.id}
            if e.id in self.apply_alias:
                return {"apply:" + self.apply_alias[e.id]}
            if e.id in self.classes:
                return {"cls:" + e.id}
            return set()
        if isinstance(e, ast.Attribute):
            if isinstance(e.value, ast.Name) and e.value.id == "self" and env.get(" cls") and \
                    self.method(next(iter(env[" cls"])), e.attr):
                return {"meth:" + next(iter(env[" cls"])) + "." + e.attr}
            if e.attr == "apply" and isinstance(e.value, ast.Name) and e.value.id in self.classes:
                return {"apply:" + e.value.id}
            if self.is_ext(e.value, env):
                return {"extfn:" + e.attr}
            if self.is_ext(e, env):
                return {"ext"}
            return set()
        if isinstance(e, ast.Subscript):
            return t(e.value)
        if isinstance(e, ast.Lambda):
            return {"lambda"}
        return set()

    def is_ext(self, e: ast.AST, env: dict[str, set[str]] | None = None) -> bool:
        """Is ``e`` an extension module handle (``ext``, ``self.ext``, ``get_ext()``)?"""
        if isinstance(e, ast.Name):
            return e.id in self.ext_globals or "ext" in (env or {}).get(e.id, set())
        if isinstance(e, ast.Attribute):
            return e.attr in self.ext_attrs or (
                isinstance(e.value, ast.Name) and e.value.id == "self" and
                any("ext" in v for (c, a), v in self.attr_types.items() if a == e.attr))
        if isinstance(e, ast.Call):
            d = _dotted(e.func, self.al) or ""
            return d in self.rep.loader_fns or d.split(".")[-1] in self.rep.loader_fns
        return False

    def _local_env(self, fn: ast.FunctionDef, cname: str | None,
                   env: dict[str, set[str]] | None = None) -> dict[str, set[str]]:
        """Local names -> types: lists built by append/+=, loop variables over containers."""
        key = (id(fn), cname)
        env = dict(env or {})
        if cname:
            env[" cls"] = {cname}  # not an identifier: the class `self` belongs to
        if key in self._busy:  # recursion (a helper calling itself): stop here
            return env
        self._busy.add(key)
        for _ in range(2):
            for n in ast.walk(fn):
                if isinstance(n, ast.Assign | ast.AugAssign | ast.AnnAssign) and n.value is not None:
                    tgts = n.targets if isinstance(n, ast.Assign) else [n.target]
                    ty = self.types(n.value, env)
                    attr = _self_attr(n.value)
                    if attr and cname:
                        ty = ty | self.attr_of(cname, attr)
                    for tg in tgts:
                        for x in ast.walk(tg):
                            if isinstance(x, ast.Name) and ty:
                                env.setdefault(x.id, set()).update(ty)
                elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                        isinstance(n.func.value, ast.Name) and \
                        n.func.attr in ("append", "extend", "insert", "add_module", "update"):
                    ty = set().union(*(self.types(a, env) for a in n.args)) if n.args else set()
                    if ty:
                        env.setdefault(n.func.value.id, set()).update(ty)
                elif isinstance(n, ast.For | ast.comprehension):
                    ty = self.types(n.iter, env)
                    attr = _self_attr(n.iter)
                    if attr and cname:
                        ty = ty | self.attr_of(cname, attr)
                    if ty:
                        for x in ast.walk(n.target):
                            if isinstance(x, ast.Name):
                                env.setdefault(x.id, set()).update(ty)
        self._busy.discard(key)
        return env

    def _collect_attrs(self, cname: str, fn: ast.FunctionDef) -> None:
        env = self._local_env(fn, cname)
        for n in ast.walk(fn):
            pairs: list[tuple[str, ast.AST]] = []
            if isinstance(n, ast.Assign):
                for tg in n.targets:
                    base = tg.value if isinstance(tg, ast.Subscript) else tg
                    if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) and \
                            base.value.id == "self":
                        pairs.append((base.attr, n.value))
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
                recv = _self_attr(n.func.value) if n.func.attr != "add_module" else None
                if n.func.attr in ("append", "extend", "insert", "update") and recv:
                    pairs += [(recv, a) for a in n.args]
                elif n.func.attr == "add_module" and len(n.args) == 2:
                    owner = _self_attr(n.func.value)
                    name = n.args[0].value if isinstance(n.args[0], ast.Constant) else "*"
                    pairs.append((owner or str(name), n.args[1]))
                elif isinstance(n.func, ast.Attribute) and n.func.attr == "register_module" \
                        and len(n.args) == 2:
                    pairs.append(("*", n.args[1]))
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and \
                    n.func.id == "setattr" and len(n.args) == 3 and \
                    isinstance(n.args[0], ast.Name) and n.args[0].id == "self":
                name = n.args[1].value if isinstance(n.args[1], ast.Constant) else "*"
                pairs.append((str(name), n.args[2]))
            for attr, value in pairs:
                ty = self.types(value, env)
                if isinstance(value, ast.Name) and value.id in self.ext_globals:
                    ty.add("ext")
                if ty:
                    self.attr_types.setdefault((cname, attr), set()).update(ty)

    def _bind_ctor_args(self) -> None:
        """``Block(..., fused_op=ext.f)`` then ``self.op = fused_op`` in ``Block.__init__``:
        the attribute gets the argument's type. Positional arguments bind when the callee is a
        known class; keyword arguments also bind to any class whose ``__init__`` takes that
        name (the callee is often a parameter: ``block(...)`` in ``_make_layer``)."""
        inits = {c: found[1] for c in self.classes if (found := self.method(c, "__init__"))}
        owners = [(c, m) for c, k in self.classes.items() for m in k.body
                  if isinstance(m, ast.FunctionDef)]
        owners += [(None, f) for f in self.funcs.values()]
        for cname, fn in owners:
            env = self._local_env(fn, cname)
            for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
                kw = {k.arg: self.types(k.value, env) for k in call.keywords if k.arg}
                kw = {k: v for k, v in kw.items() if v}
                pos = [self.types(a, env) for a in call.args]
                if not kw and not any(pos):
                    continue
                ty = self.types(call.func, env)
                if isinstance(call.func, ast.Name) and call.func.id in self.classes:
                    ty = ty | {"cls:" + call.func.id}
                known = [x[4:] for x in ty if x.startswith("cls:") and x[4:] in inits]
                for k, init in inits.items():
                    params = [a.arg for a in init.args.args[1:]]
                    bound = {p: v for p, v in kw.items() if p in params}
                    if k in known:
                        bound.update({p: v for p, v in zip(params, pos, strict=False) if v})
                    for p_name, v in bound.items():
                        self._bind(k, init, p_name, v)

    def _bind(self, cname: str, init: ast.FunctionDef, param: str, ty: set[str]) -> None:
        for n in ast.walk(init):
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Name) and n.value.id == param:
                for t in n.targets:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and \
                            t.value.id == "self":
                        self.attr_types.setdefault((cname, t.attr), set()).update(ty)

    def bases(self, cname: str) -> list[str]:
        out, todo = [], [cname]
        while todo:
            c = todo.pop(0)
            if c in out or c not in self.classes:
                continue
            out.append(c)
            todo += [b.id for b in self.classes[c].bases if isinstance(b, ast.Name)]
        return out

    def method(self, cname: str, name: str) -> tuple[str, ast.FunctionDef] | None:
        for c in self.bases(cname):
            for m in self.classes[c].body:
                if isinstance(m, ast.FunctionDef) and m.name == name:
                    return c, m
        return None

    def attr_of(self, cname: str, attr: str) -> set[str]:
        out: set[str] = set()
        for c in self.bases(cname):
            out |= self.attr_types.get((c, attr), set())
            if attr != "*" and self.attr_types.get((c, "*")) and \
                    not self.attr_types.get((c, attr)):
                out |= self.attr_types[(c, "*")]
        return out


def walk(rep: PyReport) -> None:
    """Fill ``rep.ops``, ``rep.forward_nodes`` and ``rep.module_attrs`` from ModelNew.forward."""
    from .static_py import Op

    g = Graph(rep)
    rep.graph = g
    for (c, a), ty in g.attr_types.items():
        if rep.model_new is not None and c == rep.model_new.name:
            rep.module_attrs.setdefault(a, []).extend(sorted(x[3:] for x in ty
                                                             if x.startswith("nn:")))
    entry = rep.model_new.name if rep.model_new is not None else "ModelNew"
    start = g.method(entry, "forward")
    if start is None:
        return
    todo: list[tuple[str | None, ast.FunctionDef]] = [start]
    seen: set[tuple[str | None, int]] = set()
    declared = list(dict.fromkeys(rep.functions))

    def add_torch(name: str, line: int) -> None:
        fam = ops.family(name)
        if fam or ops.is_light(name):
            rep.ops.append(Op(name, "torch_heavy" if fam else "torch_light", fam, line))

    def dispatch(ty: set[str], line: int, meth: str = "forward") -> bool:
        hit = False
        for x in sorted(ty):
            kind, _, name = x.partition(":")
            if kind == "cls":
                for m in (meth, "__call__") if meth == "forward" else (meth,):
                    found = g.method(name, m)
                    if found:
                        todo.append(found)
                        hit = True
            elif kind == "apply":
                found = g.method(name, "forward")
                if found:
                    todo.append(found)
                    hit = True
            elif kind == "nn" and meth == "forward":
                add_torch(name, line)
                hit = True
            elif kind == "meth":
                found = g.method(*name.split(".", 1))
                if found:
                    todo.append(found)
                    hit = True
            elif kind == "fn" and name in g.funcs:
                todo.append((None, g.funcs[name]))
                hit = True
            elif kind == "extfn":
                for f in (declared or ["*"]) if name == "*" else [name]:
                    rep.ops.append(Op(f, "ext", None, line))
                hit = True
            elif kind == "ext" and meth != "forward":
                rep.ops.append(Op(meth, "ext", None, line))
                hit = True
        return hit

    # each function is walked once in training mode (KernelBench's) if any path reaches it
    # there, else once as eval-only (reached only from the eval side of an `if self.training`)
    flags: dict[int, bool] = {id(start[1]): False}
    train_ext: set[int] = set()
    while todo:
        cname, fn = todo.pop()
        ev_only = flags.get(id(fn), False)
        if (cname, id(fn), ev_only) in seen or (ev_only and (cname, id(fn), False) in seen):
            continue
        seen.add((cname, id(fn), ev_only))
        if fn not in rep.forward_nodes:
            rep.forward_nodes.append(fn)
        env = g._local_env(fn, cname)
        eval_lines = set() if ev_only else _eval_branch_lines(fn)
        for node in ast.walk(fn):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                rep.ops.append(Op("matmul", "torch_heavy", "gemm", node.lineno))
            if not isinstance(node, ast.Call):
                continue
            n_todo, n_ops = len(todo), len(rep.ops)
            _classify(g, rep, node, cname, env, todo, dispatch, add_torch)
            here = ev_only or node.lineno in eval_lines
            for item in todo[n_todo:]:
                flags[id(item[1])] = flags.get(id(item[1]), True) and here
            if not here:
                train_ext |= {o.line for o in rep.ops[n_ops:] if o.kind == "ext"}
    rep.ops = sorted(set(rep.ops), key=lambda o: (o.kind != "ext", o.line, o.name))
    rep.eval_only_ext = {o.line for o in rep.ops if o.kind == "ext"} - train_ext


def unpassed_default_lines(rep: PyReport, n: int) -> set[int]:
    """Lines of ``ModelNew.forward`` that run only when one of its parameters is None although
    the harness always passes it a value: the body of ``if p is None:`` (the else of ``if p is not
    None:``) for one of the first ``n`` positional parameters (the reference's inputs:
    checks_shapes.passed_inputs). A kernel launched only there (a default for an input KernelBench
    always gives) never runs."""
    if rep.model_new is None or rep.graph is None:
        return set()
    start = rep.graph.method(rep.model_new.name, "forward")
    if start is None or n == 0:
        return set()
    fn = start[1]
    passed = {a.arg for a in fn.args.args[1:1 + n]}
    out: set[int] = set()
    for node in ast.walk(fn):
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1
                and isinstance(node.test.left, ast.Name) and node.test.left.id in passed
                and isinstance(node.test.comparators[0], ast.Constant) and node.test.comparators[0].value is None):
            continue
        if isinstance(node.test.ops[0], ast.Is):
            out |= _lines(node.body)
        elif isinstance(node.test.ops[0], ast.IsNot):
            out |= _lines(node.orelse)
    return out


def _mode(test: ast.AST) -> str | None:
    """"train" if a test is true only in training mode, "eval" if only in eval mode."""
    if isinstance(test, ast.Attribute) and test.attr == "training":
        return "train"
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        m = _mode(test.operand)
        return {"train": "eval", "eval": "train"}.get(m) if m else None
    if isinstance(test, ast.BoolOp):
        modes = [_mode(v) for v in test.values]
        want = "eval" if isinstance(test.op, ast.And) else "train"
        return want if want in modes else None  # `not training and x.is_cuda`: eval only
    return None


def _lines(stmts) -> set[int]:
    return {x.lineno for s in (stmts if isinstance(stmts, list) else [stmts])
            for x in ast.walk(s) if hasattr(x, "lineno")}


def _eval_branch_lines(fn: ast.FunctionDef) -> set[int]:
    """Lines that run only in eval mode: the eval side of ``if self.training`` /
    ``if not self.training and ...``, and what follows ``if self.training: return ...``."""
    out: set[int] = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.If | ast.IfExp):
            m = _mode(n.test)
            if m == "eval":
                out |= _lines(n.body)
            elif m == "train":
                out |= _lines(n.orelse)
        for block in (getattr(n, f, None) for f in ("body", "orelse", "finalbody")):
            if not isinstance(block, list):
                continue
            for i, st in enumerate(block):  # if self.training: return torch_path(x)
                if isinstance(st, ast.If) and not st.orelse and _mode(st.test) == "train" and \
                        st.body and isinstance(st.body[-1], ast.Return):
                    out |= _lines(block[i + 1:])
    return out


def _classify(g: Graph, rep, node: ast.Call, cname, env, todo, dispatch, add_torch) -> None:
    from .static_py import Op

    al = rep.aliases
    f = node.func
    d = _dotted(f, al) or ""
    last = d.split(".")[-1]
    if last.startswith("__") and last.endswith("__"):
        last = last.strip("_")  # x.__matmul__(w) is x @ w
    root = d.split(".")[0]
    line = node.lineno
    # extension function aliases: fn = ext.fn / self.fn = ext.fn
    short = d[5:] if d.startswith("self.") else d
    if d in rep.ext_fn_aliases or ("self." + short) in rep.ext_fn_aliases or \
            short in rep.ext_fn_aliases:
        name = rep.ext_fn_aliases.get(d) or rep.ext_fn_aliases.get("self." + short) or \
            rep.ext_fn_aliases.get(short, last)
        rep.ops.append(Op(name, "ext", None, line))
        return
    if isinstance(f, ast.Attribute) and g.is_ext(f.value, env):
        rep.ops.append(Op(f.attr, "ext", None, line))
        return
    if isinstance(f, ast.Call):  # getattr(ext, "f")(x), Block(...)(x)
        ty = g.types(f, env)
        if ty and dispatch(ty, line):
            return
    if isinstance(f, ast.Name):
        if f.id in env and dispatch(env[f.id], line):
            return
        if f.id in g.funcs:
            todo.append((None, g.funcs[f.id]))
            return
        if f.id in g.apply_alias:
            dispatch({"apply:" + g.apply_alias[f.id]}, line)
            return
        if f.id in g.classes:  # instantiating a program class inside forward
            for m in ("__init__", "__call__"):
                found = g.method(f.id, m)
                if found:
                    todo.append(found)
            return
    if isinstance(f, ast.Attribute):
        v = f.value
        # super().forward(x) / super().method(x)
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "super" \
                and cname:
            for b in g.bases(cname)[1:]:
                found = g.method(b, f.attr)
                if found:
                    todo.append(found)
                    return
            return
        if f.attr == "apply" and isinstance(v, ast.Name) and v.id in g.classes:
            dispatch({"apply:" + v.id}, line)
            return
        if isinstance(v, ast.Name) and v.id == "self" and cname:
            found = g.method(cname, f.attr)
            if found:
                todo.append(found)
                return
            ty = g.attr_of(cname, f.attr)
            if ty and dispatch(ty, line):
                return
            if ("self." + f.attr) in g.apply_alias:
                dispatch({"apply:" + g.apply_alias["self." + f.attr]}, line)
                return
        attr = _self_attr(v)
        if attr and cname and isinstance(v, ast.Attribute):  # self.block.method(x)
            ty = g.attr_of(cname, attr)
            if ty and dispatch(ty, line, f.attr if f.attr != "__call__" else "forward"):
                return
        if isinstance(v, ast.Name) and v.id in env:  # layer.forward(x)
            meth = "forward" if f.attr in ("forward", "__call__") else f.attr
            if dispatch(env[v.id], line, meth):
                return
    if isinstance(f, ast.Subscript) and isinstance(f.value, ast.Name) and \
            f.value.id in rep.triton_kernels:  # a Triton launch: kern[grid](...)
        rep.ops.append(Op(f.value.id, "ext", None, line))
        return
    if isinstance(f, ast.Subscript):  # self.layers[i](x), layers[i](x)
        attr = _self_attr(f)
        ty = (g.attr_of(cname, attr) if attr and cname else set()) | g.types(f, env)
        if ty:
            dispatch(ty, line)
        return
    if root == "torch" or (isinstance(f, ast.Attribute) and _dotted(f.value, al) is None or (
            isinstance(f, ast.Attribute) and root not in al.values() and root not in g.funcs)):
        if any(d.startswith(p) for p in TORCH_NONCOMPUTE) or ops.is_incidental(last):
            return
        if root != "torch" and not isinstance(f, ast.Attribute):
            return
        if root == "self" and cname and d.count(".") == 1:
            return  # an unresolved self.attr(...) call is not a torch op by name alone
        fam = ops.family(last)
        if fam:
            rep.ops.append(Op(last, "torch_heavy", fam, line))
        elif ops.is_light(last) or (root == "torch" and last[:1].islower()):
            rep.ops.append(Op(last, "torch_light", None, line))
