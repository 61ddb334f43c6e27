"""Which queued build starts first: the build pool takes the candidate guessed longest from its
build's start to its readiness for the GPU lock (longest first), so the slowest candidates of a
batch do not start last and set its end.

The guess comes from the program's text alone (nothing is run): the CUDA string literals it would
build, whether ``splitcu`` splits each one (a torch-free ``.cu`` and a binding unit on the shared
PCH) or declines it (templates, ``AT_DISPATCH``, namespaces: nvcc parses torch's headers), and
whether it calls ``torch.compile``, whose first forward compiles in the candidate's resident place.
Measured on the H100 host, 8 builds at once, 24 real-style candidates (bench/harness_throughput):
split sources built in 10-13 s, declined ones in 25-38 s (session 19); a ``torch.compile`` in
``__init__`` loaded for 16-27 s after its build, and the four that did were the run's last four to
finish, 55-71 s of 71 s, having been built in the order submitted (session 20).
"""

from __future__ import annotations

import ast

from rewards.harness import splitcu

SPLIT_S = 11.0  # a CUDA source splitcu splits (H100, 8 at once)
WHOLE_S = 30.0  # one it declines: nvcc parses torch's headers
COMPILE_S = 20.0  # torch.compile's first forward (dynamo + inductor) while the candidate loads
BASE_S = 1.0  # a program with no build: its worker's start, exec and construction


def parse(source: str) -> ast.AST | None:
    """The program's syntax tree; None when it does not parse (rejected in a moment)."""
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def cuda_literals(tree: ast.AST) -> list[str]:
    """The program's string constants that hold a kernel."""
    return [n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and "__global__" in n.value]


def calls_torch_compile(tree: ast.AST) -> bool:
    """``torch.compile`` called or used as a decorator anywhere (``@torch.compile(mode=...)`` too)."""
    return any(isinstance(n, ast.Attribute) and n.attr == "compile" and isinstance(n.value, ast.Name)
               and n.value.id == "torch" for n in ast.walk(tree))


def guess_s(source: str) -> float:
    """Seconds from this candidate's build start to its readiness, relative to the others."""
    tree = parse(source)
    if tree is None:
        return BASE_S
    load = COMPILE_S if calls_torch_compile(tree) else 0.0
    if "load_inline" not in source and "cpp_extension" not in source:
        return BASE_S + load
    lits = cuda_literals(tree)
    if not lits:  # sources made at run time (f-strings, files) or C++ only: guessed long
        return BASE_S + WHOLE_S + load
    return BASE_S + load + sum(SPLIT_S if splitcu.split(s) is not None else WHOLE_S for s in lits)
