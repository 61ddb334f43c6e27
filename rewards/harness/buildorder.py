"""Which queued build starts first: the build pool takes the one guessed longest (longest first),
so the slowest builds of a batch do not start last and set its end.

The guess comes from the program's text alone (nothing is run): the CUDA string literals it would
build, and whether ``splitcu`` splits each one (a torch-free ``.cu`` and a binding unit on the
shared PCH) or declines it (templates, ``AT_DISPATCH``, namespaces: nvcc parses torch's headers).
Measured on the H100 host, 8 builds at once, 24 real-style candidates (bench/harness_throughput,
session 19): split sources built in 10-13 s, declined ones in 25-38 s; queued in submission order,
the last declined one started at 34 s and was ready at 59 s of a 79 s run.
"""

from __future__ import annotations

import ast

from rewards.harness import splitcu

SPLIT_S = 11.0  # a CUDA source splitcu splits (H100, 8 at once)
WHOLE_S = 30.0  # one it declines: nvcc parses torch's headers
BASE_S = 1.0  # a program with no build: its worker's start, exec and construction


def cuda_literals(source: str) -> list[str] | None:
    """The string constants of ``source`` that hold a kernel; None when it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    return [n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and "__global__" in n.value]


def guess_s(source: str) -> float:
    """Seconds this candidate's build is guessed to take, relative to the others."""
    if "load_inline" not in source and "cpp_extension" not in source:
        return BASE_S
    lits = cuda_literals(source)
    if lits is None:
        return BASE_S  # a syntax error: rejected in a moment
    if not lits:  # sources made at run time (f-strings, files) or C++ only: guessed long
        return BASE_S + WHOLE_S
    return BASE_S + sum(SPLIT_S if splitcu.split(s) is not None else WHOLE_S for s in lits)
