"""Load a KernelBench-format source as a module, optionally with its size constants overridden.

Overrides rewrite the module-level assignments in the AST before execution, so constants
derived from them (``HIDDEN = 4 * DIM``) follow. Only the harness calls this with overrides;
a candidate's own constants are never consulted for the reference's shapes.
"""

from __future__ import annotations

import ast
import contextlib
import types
from collections.abc import Iterator
from typing import Any

REQUIRED = ("Model", "get_inputs", "get_init_inputs")


@contextlib.contextmanager
def meta_device() -> Iterator[None]:
    """``torch.device("meta")`` that redirects every factory function, whatever ran before.

    torch caches its list of factory functions on first use
    (``torch.utils._device._device_constructors``). When that first use happens inside
    transformers' ``from_pretrained``, which swaps ``torch.linspace`` for a wrapper defaulting to
    CPU, the real ``linspace`` stays out of the list for the life of the process, and a model
    built later under ``torch.device("meta")`` gets CPU parameters from it ("Tensor on device
    cpu is not on the expected device meta"). The list is rebuilt here first.
    """
    import torch
    import torch.utils._device as device_mod

    cached = getattr(device_mod, "_device_constructors", None)
    if hasattr(cached, "cache_clear"):
        cached.cache_clear()
    with torch.device("meta"):
        yield


class ReferenceError_(ValueError):
    """A reference source that is not in KernelBench format; the message is one sentence."""


def module_constants(source: str) -> dict[str, Any]:
    """Module-level ``NAME = <literal>`` assignments, evaluated (no code runs).

    >>> module_constants("import torch\\nB = 8\\nD = 2 * 3\\nNAME = 'x'\\n")
    {'B': 8, 'NAME': 'x'}
    """
    out: dict[str, Any] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            tgt = node.targets[0]
            if isinstance(tgt, ast.Name):
                try:
                    out[tgt.id] = ast.literal_eval(node.value)
                except ValueError:
                    pass
    return out


def override_constants(source: str, overrides: dict[str, Any]) -> str:
    """Return ``source`` with module-level constants replaced; unknown names are an error.

    >>> print(override_constants("B = 8\\nH = B * 4", {"B": 2}))
    B = 2
    H = B * 4
    """
    if not overrides:
        return source
    tree = ast.parse(source)
    seen: set[str] = set()
    for node in tree.body:
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        for tgt in targets:
            if isinstance(tgt, ast.Name) and tgt.id in overrides:
                node.value = ast.parse(repr(overrides[tgt.id]), mode="eval").body
                seen.add(tgt.id)
    missing = sorted(set(overrides) - seen)
    if missing:
        raise ReferenceError_(f"size override(s) {missing} name no module-level constant")
    return ast.unparse(ast.fix_missing_locations(tree))


def check_format(source: str) -> str | None:
    """One sentence saying what is wrong with a reference source, or None if it looks right."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return f"it is not valid Python (line {e.lineno}: {e.msg})"
    names = {
        n.name
        for n in tree.body
        if isinstance(n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
    }
    names |= {
        t.id
        for n in tree.body
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    missing = [r for r in REQUIRED if r not in names]
    if missing:
        return "it defines no " + ", no ".join(f"`{m}`" for m in missing)
    return None


def load_module(
    source: str, overrides: dict[str, Any] | None = None, name: str = "reference"
) -> types.ModuleType:
    """Execute a reference source (after overrides) as a fresh module and check its format."""
    problem = check_format(source)
    if problem:
        raise ReferenceError_(problem)
    code = override_constants(source, overrides or {})
    mod = types.ModuleType(name)
    mod.__file__ = f"<{name}>"
    try:
        exec(compile(code, f"<{name}>", "exec"), mod.__dict__)
    except Exception as e:  # noqa: BLE001 - any import failure is the file's fault
        raise ReferenceError_(f"it fails to import ({type(e).__name__}: {e})") from e
    for attr in REQUIRED:
        if not callable(getattr(mod, attr, None)):
            raise ReferenceError_(f"`{attr}` is not callable")
    return mod


def shared_names(source: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The names a fresh load of the reference defines (constants, helpers, ``Model``, imports),
    for the candidate's namespace: KernelBench execs the reference and then the solution in one
    dict, so solutions use ``batch_size``, helpers and ``Model`` without defining them. A fresh
    load holds no reference outputs, baselines or harness objects; dunders stay the candidate's.
    """
    mod = load_module(source, overrides, name="reference")
    return {k: v for k, v in vars(mod).items() if not (k.startswith("__") and k.endswith("__"))}
