"""The order in which the build pool takes candidates (``harness.build_order``, issue 17).

A batch is submitted at once (a store to score, a GRPO step's groups), and its builds finish in
waves of ``build_workers``. In first-come order a heavy build that comes late sets the batch's
end: on the H100 (session 18, 24 tasks) three templated ``AT_DISPATCH`` sources, which the
launcher split cannot move out of nvcc, took 38-59 s against 11-20 s for the others, and the
two that started in the last wave made the last candidate ready at 94 s. Longest-first is the
classic cure for that tail (LPT scheduling); the length is guessed from the source alone, before
anything runs, by the rule the fast build itself follows (buildcache.lighten): a CUDA source
that uses torch and cannot be split compiles torch's headers in nvcc.

Ranks (lower goes first): ``none`` (nothing to compile: the build stage only imports it, and its
candidate can reach the GPU at once), ``heavy``, ``light``. Within a rank, submission order.
The rank only orders the queue; it never changes what is built or how a candidate is judged, so
a candidate that dresses itself up as heavy gains a place in the queue and nothing else.
"""

from __future__ import annotations

import ast
import concurrent.futures as cf
import heapq
import itertools
import threading

from rewards.harness import buildcache, splitcu

RANKS = {"none": 0, "heavy": 1, "light": 2}
ORDERS = ("heavy_first", "fifo")


def _strings(tree: ast.AST) -> list[str]:
    """String literals of a module; an f-string counts by its literal parts."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append(node.value)
        elif isinstance(node, ast.JoinedStr):
            out.append("".join(v.value for v in node.values if isinstance(v, ast.Constant)))
    return out


def cuda_literals(source: str) -> list[str]:
    """The CUDA sources a program spells out as string literals (those holding a kernel).

    >>> cuda_literals('src = "__global__ void k(float* x) { x[0] = 1; }"\\nname = "k"')
    ['__global__ void k(float* x) { x[0] = 1; }']
    >>> cuda_literals('def (')  # not Python: nothing known
    []
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    return [s for s in _strings(tree) if "__global__" in s]


def build_class(source: str, split_launchers: bool = True) -> str:
    """``none``, ``heavy`` or ``light``: what the build pool will spend on this program.

    >>> build_class("import torch\\nclass ModelNew(torch.nn.Module): pass")
    'none'
    >>> tmpl = ('template <typename scalar_t> __global__ void k(scalar_t* x) {}\\n'
    ...         'torch::Tensor f(torch::Tensor x) { AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "f", '
    ...         '([&] { k<scalar_t><<<1, 1>>>(x.data_ptr<scalar_t>()); })); return x; }')
    >>> build_class(f"from torch.utils.cpp_extension import load_inline\\nsrc = '''{tmpl}'''")
    'heavy'
    >>> flat = ('__global__ void k(float* x) {}\\n'
    ...         'torch::Tensor f(torch::Tensor x) { k<<<1, 1>>>(x.data_ptr<float>()); return x; }')
    >>> build_class(f"from torch.utils.cpp_extension import load_inline\\nsrc = '''{flat}'''")
    'light'
    >>> build_class(f"from torch.utils.cpp_extension import load_inline\\nsrc = '''{flat}'''", False)
    'heavy'
    """
    if "cpp_extension" not in source and "load_inline" not in source:
        return "none"
    for cu in cuda_literals(source):
        if buildcache.uses_torch(cu) and (not split_launchers or splitcu.split(cu) is None):
            return "heavy"
    return "light"


class PriorityPool:
    """A thread pool that runs queued jobs lowest rank first, in submission order within a rank.

    Each ``submit`` queues one job and one pool task; the task takes whichever queued job ranks
    first when a thread frees, so the executor's own FIFO order never decides. ``shutdown`` is the
    executor's (``cancel_futures`` drops tasks not started; their jobs are never run)."""

    def __init__(self, workers: int, thread_name_prefix: str = "", ordered: bool = True):
        self._ex = cf.ThreadPoolExecutor(workers, thread_name_prefix=thread_name_prefix)
        self._heap: list[tuple] = []
        self._lock = threading.Lock()
        self._seq = itertools.count()
        self.ordered = ordered

    def submit(self, rank: int, fn, *args) -> cf.Future:
        with self._lock:
            heapq.heappush(self._heap, (rank if self.ordered else 0, next(self._seq), fn, args))
        return self._ex.submit(self._run_next)

    def _run_next(self) -> None:
        with self._lock:
            _, _, fn, args = heapq.heappop(self._heap)
        fn(*args)

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        self._ex.shutdown(wait=wait, cancel_futures=cancel_futures)
