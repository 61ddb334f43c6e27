"""Content hashes of Python sources: exact (normalized) and structural (near-duplicate).

The normalized hash is a task's identity everywhere (trajectories, samples, decontamination):
comments, docstrings, blank lines and formatting do not change it. The structural hash also
ignores identifier names and the order of module-level constant assignments, so renamed or
reordered copies of a reference are caught by decontamination.
"""

from __future__ import annotations

import ast
import hashlib

__all__ = ["normalized_source", "content_hash", "structural_source", "structural_hash"]


def _strip_docstrings(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                node.body = body[1:] or [ast.Pass()]


def normalized_source(source: str) -> str:
    """Source re-printed from its AST without comments or docstrings.

    >>> normalized_source("x = 1  # one\\n\\n\\ny=2") == normalized_source("x=1\\ny = 2")
    True
    """
    tree = ast.parse(source)
    _strip_docstrings(tree)
    return ast.unparse(tree)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def content_hash(source: str) -> str:
    """sha256 of :func:`normalized_source` (first 16 hex digits)."""
    return _sha(normalized_source(source))[:16]


class _Canonicalize(ast.NodeTransformer):
    """Rename every user-chosen identifier to its order of first appearance."""

    _KEEP = frozenset(dir(__builtins__) if isinstance(__builtins__, dict) else dir(__builtins__))

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def _canon(self, name: str) -> str:
        if name in self._KEEP or name.startswith("__"):
            return name
        return self.names.setdefault(name, f"v{len(self.names)}")

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self._canon(node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self._canon(node.arg)
        node.annotation = None
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        # forward/__init__/get_inputs are part of the format, not free names
        if node.name not in {"forward", "__init__", "get_inputs", "get_init_inputs"}:
            node.name = self._canon(node.name)
        node.returns = None
        self.generic_visit(node)
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        node.name = self._canon(node.name)
        self.generic_visit(node)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        # self.<attr> names are free choices; torch.<attr> names are not
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            node.attr = self._canon("self." + node.attr)
        self.generic_visit(node)
        return node


def _is_constant_assign(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant | ast.UnaryOp | ast.BinOp | ast.Tuple)
    )


def structural_source(source: str) -> str:
    """A form of the source that is equal for renamed and constant-reordered copies.

    >>> a = "B = 2\\nA = 3\\ndef get_inputs():\\n    return [A * B]"
    >>> b = "alpha = 3\\nbeta = 2\\ndef get_inputs():\\n    return [alpha * beta]"
    >>> structural_hash(a) == structural_hash(b)  # renamed AND reordered: same structure
    True
    >>> structural_hash(a) == structural_hash(a.replace("A * B", "A + B"))
    False
    """
    tree = ast.parse(source)
    _strip_docstrings(tree)
    body = [n for n in tree.body if not isinstance(n, ast.Import | ast.ImportFrom)]
    consts = [n for n in body if _is_constant_assign(n)]
    rest = [n for n in body if not _is_constant_assign(n)]
    # Canonicalize names on the non-constant code first so that names get numbered by use,
    # not by the (reorderable) order of the constant block; then sort the constants.
    canon = _Canonicalize()
    rest_mod = canon.visit(ast.Module(body=rest, type_ignores=[]))
    const_mod = canon.visit(ast.Module(body=consts, type_ignores=[]))
    const_lines = sorted(ast.unparse(n) for n in const_mod.body)
    return "\n".join(const_lines) + "\n" + ast.unparse(rest_mod)


def structural_hash(source: str) -> str:
    """sha256 of :func:`structural_source` (first 16 hex digits)."""
    return _sha(structural_source(source))[:16]
