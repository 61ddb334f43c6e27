"""`ast` analysis of a candidate: its extensions, and what `ModelNew.forward` computes how.

Resolves imports (``import torch.nn.functional as F``), extension handles
(``ext = load_inline(...)``, ``self.ext = load_inline(...)``, ``fn = ext.fn``, functions that
return ``load_inline(...)``) and walks ``forward`` plus the methods/functions it calls,
sorting every call into torch compute (heavy or light), extension calls, or incidental.

>>> src = '''
... import torch, torch.nn as nn
... from torch.utils.cpp_extension import load_inline
... ext = load_inline(name="e", cpp_sources="", cuda_sources=CU, functions=["gelu"])
... class ModelNew(nn.Module):
...     def __init__(self, d):
...         super().__init__()
...         self.fc = nn.Linear(d, d)
...     def forward(self, x):
...         return ext.gelu(self.fc(x).view(-1))
... '''
>>> r = extract(src)
>>> [(o.name, o.kind, o.family) for o in r.ops]
[('gelu', 'ext', None), ('Linear', 'torch_heavy', 'gemm')]
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from . import ops

TORCH_NONCOMPUTE = ("torch.cuda.", "torch.backends.", "torch.utils.", "torch.autograd.",
                    "torch.jit.", "torch.library.", "torch._C.", "torch.Size", "torch.no_grad",
                    "torch.manual_seed", "torch.device", "torch.dtype", "torch.is_tensor")


@dataclass(frozen=True)
class Op:
    name: str
    kind: str  # torch_heavy | torch_light | ext
    family: str | None
    line: int


@dataclass
class PyReport:
    tree: ast.Module | None = None
    lines: list[str] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)
    ext_names: set[str] = field(default_factory=set)       # module names / self attrs of extensions
    ext_fn_aliases: dict[str, str] = field(default_factory=dict)  # alias -> ext function
    sources: list[str] = field(default_factory=list)       # cpp/cuda source strings
    functions: list[str] = field(default_factory=list)     # load_inline functions=[...]
    model_new: ast.ClassDef | None = None
    forward_nodes: list[ast.AST] = field(default_factory=list)  # forward + reached callees
    module_attrs: dict[str, list[str]] = field(default_factory=dict)  # self.x -> nn ctor names
    ops: list[Op] = field(default_factory=list)
    syntax_error: str | None = None

    def ev(self, node: ast.AST) -> str:
        ln = getattr(node, "lineno", 0)
        text = self.lines[ln - 1].strip() if 0 < ln <= len(self.lines) else ""
        return f"L{ln}: {text[:120]}"


def dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """``F.relu`` -> ``torch.nn.functional.relu`` given the import aliases."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(aliases.get(node.id, node.id))
    elif isinstance(node, ast.Call):
        inner = dotted(node.func, aliases)
        if inner is None:
            return None
        parts.append(inner + "()")
    else:
        return None
    return ".".join(reversed(parts))


def _aliases(tree: ast.Module) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    for node in ast.walk(tree):  # lin = F.linear / mm = torch.ops.aten.mm: aliases of torch ops
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute):
            d = dotted(node.value, out)
            if d and d.startswith("torch."):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        out[t.id] = d
    return out


def _strings(tree: ast.Module) -> dict[str, str]:
    """Every ``NAME = <string expression>`` in the file (any scope), evaluated statically."""
    env: dict[str, str] = {}

    def val(e: ast.AST) -> str | None:
        if isinstance(e, ast.Constant) and isinstance(e.value, str):
            return e.value
        if isinstance(e, ast.JoinedStr):
            return "".join(v.value if isinstance(v, ast.Constant) else "0" for v in e.values)
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
            a, b = val(e.left), val(e.right)
            return None if a is None or b is None else a + b
        if isinstance(e, ast.Name):
            return env.get(e.id)
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in (
                "format", "replace", "strip", "lstrip"):
            return val(e.func.value)
        if isinstance(e, ast.List | ast.Tuple):
            parts = [val(x) for x in e.elts]
            return "\n".join(p for p in parts if p is not None)
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            t = node.targets[0]
            v = val(node.value)
            if v is not None and isinstance(t, ast.Name):
                env[t.id] = v
    env["__val__"] = val  # type: ignore[assignment]
    return env


def _is_loader(d: str | None) -> bool:
    return bool(d) and d.split(".")[-1] in ("load_inline", "load", "compile_cuda_ext") and (
        "cpp_extension" in d or d in ("load_inline", "load"))


def extract(source: str) -> PyReport:
    rep = PyReport(lines=source.splitlines())
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        rep.syntax_error = f"line {e.lineno}: {e.msg}"
        return rep
    rep.tree = tree
    rep.aliases = al = _aliases(tree)
    env = _strings(tree)
    val = env.pop("__val__")
    loader_fns: set[str] = set()
    for fn in ast.walk(tree):  # helper functions that return load_inline(...)
        if isinstance(fn, ast.FunctionDef):
            for r in ast.walk(fn):
                if isinstance(r, ast.Call) and _is_loader(dotted(r.func, al)):
                    loader_fns.add(fn.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _is_loader(dotted(node.func, al)):
            for kw in node.keywords:
                if kw.arg in ("cpp_sources", "cuda_sources", "sources"):
                    s = val(kw.value)
                    if s:
                        rep.sources.append(s)
                elif kw.arg == "functions" and isinstance(kw.value, ast.List | ast.Tuple):
                    rep.functions += [e.value for e in kw.value.elts if isinstance(e, ast.Constant)]
            for a in node.args[1:3]:
                s = val(a)
                if s:
                    rep.sources.append(s)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            d = dotted(node.value.func, al)
            is_ext = _is_loader(d) or (d in loader_fns)
            for t in node.targets:
                name = t.id if isinstance(t, ast.Name) else (
                    "self." + t.attr if isinstance(t, ast.Attribute) else None)
                if name and is_ext:
                    rep.ext_names.add(name)
    for node in ast.walk(tree):  # fn = ext.fn / self.fn = ext.fn / self.fn = self.ext.fn
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute):
            base = dotted(node.value.value, {})
            if base in rep.ext_names or (base and base.replace("self.", "") in
                                         {n.replace("self.", "") for n in rep.ext_names}):
                for t in node.targets:
                    name = t.id if isinstance(t, ast.Name) else (
                        "self." + t.attr if isinstance(t, ast.Attribute) else None)
                    if name:
                        rep.ext_fn_aliases[name] = node.value.attr
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            rep.model_new = node
    if rep.model_new is not None:
        _walk_forward(rep)
    return rep


def _methods(cls: ast.ClassDef) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}


def _walk_forward(rep: PyReport) -> None:
    al, tree, cls = rep.aliases, rep.tree, rep.model_new
    methods = _methods(cls)
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    init = methods.get("__init__")
    if init is not None:
        for node in ast.walk(init):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and \
                            t.value.id == "self":
                        ctors = []
                        for c in ast.walk(node.value):
                            if isinstance(c, ast.Call):
                                d = dotted(c.func, al) or ""
                                if d.startswith("torch.nn.") and d.split(".")[-1][:1].isupper():
                                    ctors.append(d.split(".")[-1])
                        ctors = [c for c in ctors if c not in ("Sequential", "ModuleList",
                                                               "ModuleDict", "Parameter")]
                        if ctors:
                            rep.module_attrs.setdefault(t.attr, []).extend(ctors)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in ("append", "add_module", "extend"):
                tgt = dotted(node.func.value, {}) or ""
                if tgt.startswith("self."):
                    for c in ast.walk(node):
                        if isinstance(c, ast.Call):
                            d = dotted(c.func, al) or ""
                            if d.startswith("torch.nn.") and d.split(".")[-1][:1].isupper():
                                rep.module_attrs.setdefault(tgt[5:], []).append(d.split(".")[-1])
    # local lists built in __init__ then wrapped: self.net = nn.Sequential(*layers)
    if init is not None:
        local: dict[str, list[str]] = {}
        for node in ast.walk(init):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    isinstance(node.func.value, ast.Name) and \
                    node.func.attr in ("append", "extend", "insert"):
                for c in ast.walk(node):
                    if isinstance(c, ast.Call):
                        d = dotted(c.func, al) or ""
                        if d.startswith("torch.nn.") and d.split(".")[-1][:1].isupper():
                            local.setdefault(node.func.value.id, []).append(d.split(".")[-1])
            if isinstance(node, ast.AugAssign | ast.Assign):
                tgts = [node.target] if isinstance(node, ast.AugAssign) else node.targets
                for t in tgts:
                    if isinstance(t, ast.Name):
                        for c in ast.walk(node.value):
                            if isinstance(c, ast.Call):
                                d = dotted(c.func, al) or ""
                                if d.startswith("torch.nn.") and d.split(".")[-1][:1].isupper():
                                    local.setdefault(t.id, []).append(d.split(".")[-1])
        for node in ast.walk(init):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Attribute):
                        for n in ast.walk(node.value):
                            if isinstance(n, ast.Name) and n.id in local:
                                rep.module_attrs.setdefault(t.attr, []).extend(local[n.id])
    fwd = methods.get("forward")
    if fwd is None:
        return
    todo: list[ast.AST] = [fwd]
    seen: set[int] = set()
    ext_short = {n.replace("self.", "") for n in rep.ext_names}
    while todo:
        fn = todo.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        rep.forward_nodes.append(fn)
        for node in ast.walk(fn):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                rep.ops.append(Op("matmul", "torch_heavy", "gemm", node.lineno))
            if not isinstance(node, ast.Call):
                continue
            d = dotted(node.func, al) or ""
            last = d.split(".")[-1]
            if last.startswith("__") and last.endswith("__"):
                last = last.strip("_")  # x.__matmul__(w) is x @ w
            root = d.split(".")[0]
            if d in rep.ext_fn_aliases or d.replace("self.", "") in {
                    k.replace("self.", "") for k in rep.ext_fn_aliases}:
                name = rep.ext_fn_aliases.get(d) or rep.ext_fn_aliases.get(
                    "self." + d.replace("self.", ""), last)
                rep.ops.append(Op(name, "ext", None, node.lineno))
            elif isinstance(node.func, ast.Attribute) and (
                    dotted(node.func.value, {}) in rep.ext_names or
                    (dotted(node.func.value, {}) or "").replace("self.", "") in ext_short):
                rep.ops.append(Op(last, "ext", None, node.lineno))
            elif d.startswith("self.") and d.count(".") == 1 and last in methods:
                todo.append(methods[last])
            elif d.startswith("self.") and d.split(".")[1] in rep.module_attrs and \
                    (d.count(".") == 1 or d.endswith("()")):
                for ctor in rep.module_attrs[d.split(".")[1]]:
                    fam = ops.family(ctor)
                    if fam or ops.is_light(ctor):
                        rep.ops.append(Op(ctor, "torch_heavy" if fam else "torch_light", fam,
                                          node.lineno))
            elif d in funcs:
                todo.append(funcs[d])
            elif d.endswith(".apply") and d.split(".")[0] in classes:
                for m in _methods(classes[d.split(".")[0]]).values():
                    if m.name == "forward":
                        todo.append(m)
            elif root == "torch" or (isinstance(node.func, ast.Attribute) and
                                     dotted(node.func.value, al) is None or
                                     (isinstance(node.func, ast.Attribute) and
                                      root not in al.values() and root not in funcs)):
                if any(d.startswith(p) for p in TORCH_NONCOMPUTE) or ops.is_incidental(last):
                    continue
                if root != "torch" and not isinstance(node.func, ast.Attribute):
                    continue
                fam = ops.family(last)
                if fam:
                    rep.ops.append(Op(last, "torch_heavy", fam, node.lineno))
                elif ops.is_light(last) or (root == "torch" and last[:1].islower()):
                    rep.ops.append(Op(last, "torch_light", None, node.lineno))
    rep.ops.sort(key=lambda o: (o.kind != "ext", o.line))
