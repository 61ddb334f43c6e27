"""The build pool starts the build guessed longest first (harness.build_order, buildorder.py)."""

from __future__ import annotations

import concurrent.futures as cf
import time
from pathlib import Path

import pytest

from rewards.harness import Evaluator, buildorder

CANDS = Path(__file__).parent / "candidates"

# what most LLM programs write: float kernels and torch::Tensor launchers (splitcu splits it)
SPLIT_CU = r'''
#include <torch/extension.h>
__global__ void relu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
torch::Tensor relu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
'''
# a templated kernel dispatched by AT_DISPATCH: splitcu declines it, nvcc parses torch's headers
TEMPLATED_CU = r'''
#include <torch/extension.h>
template <typename scalar_t>
__global__ void relu_kernel(const scalar_t* x, scalar_t* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > scalar_t(0) ? x[i] : scalar_t(0);
}
torch::Tensor relu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "relu", [&] {
        relu_kernel<scalar_t><<<(n + 255) / 256, 256>>>(x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), n);
    });
    return y;
}
'''


def program(cu: str, where: str = "module") -> str:
    load = 'load_inline(name="ext", cpp_sources="torch::Tensor relu(torch::Tensor x);", cuda_sources=CU, functions=["relu"])'
    body = f"ext = {load}\n" if where == "module" else f"class ModelNew:\n    def __init__(self):\n        self.ext = {load}\n"
    return f'from torch.utils.cpp_extension import load_inline\nCU = r"""{cu}"""\n{body}'


def test_a_source_splitcu_declines_is_guessed_longer():
    split, whole = buildorder.guess_s(program(SPLIT_CU)), buildorder.guess_s(program(TEMPLATED_CU, "init"))
    assert split == buildorder.BASE_S + buildorder.SPLIT_S
    assert whole == buildorder.BASE_S + buildorder.WHOLE_S
    two = program(SPLIT_CU).replace("ext = load_inline", f'CU2 = r"""{TEMPLATED_CU}"""\next = load_inline')
    assert buildorder.guess_s(two) == buildorder.BASE_S + buildorder.SPLIT_S + buildorder.WHOLE_S


@pytest.mark.parametrize("src,want", [
    ("import torch\nclass ModelNew(torch.nn.Module):\n    pass\n", buildorder.BASE_S),  # builds nothing
    ("from torch.utils.cpp_extension import load_inline\ndef f(:\n", buildorder.BASE_S),  # rejected at once
    # the CUDA source made at run time: not read, guessed long
    ('from torch.utils.cpp_extension import load_inline\nB = 256\nCU = f"__global__ void k() {{ }} // {B}"\n'
     'ext = load_inline(name="e", cpp_sources="", cuda_sources=CU)\n', buildorder.BASE_S + buildorder.WHOLE_S),
])
def test_guesses_for_programs_that_build_nothing_fail_or_make_their_source(src, want):
    assert buildorder.guess_s(src) == want


def test_the_candidates_under_tests_are_guessed():
    for f in CANDS.glob("*.py"):  # any program text: a guess, never an exception
        assert buildorder.guess_s(f.read_text()) >= buildorder.BASE_S


@pytest.mark.parametrize("order,want", [("longest", ["templated", "split-1", "split-2", "none"]),
                                        ("fifo", ["split-1", "templated", "none", "split-2"])])
def test_the_pool_starts_the_build_guessed_longest(order, want, monkeypatch):
    """Submitted in a loop to a one-thread pool: ``longest`` starts the templated source first,
    then the split ones in submission order, the program with no build last; ``fifo`` keeps the
    submission order."""
    ev = Evaluator({"device": "cpu", "build_order": order})  # not entered: no workers
    started: list[str] = []

    def stage(task, src, ctx, fut, t0):
        started.append(task)
        time.sleep(0.01)
        fut.set_result(task)

    monkeypatch.setattr(ev, "_context_future", lambda task, fut: None)
    monkeypatch.setattr(ev, "_stage_build", stage)
    ev._build_pool = cf.ThreadPoolExecutor(1)
    try:
        progs = {"split-1": program(SPLIT_CU), "templated": program(TEMPLATED_CU), "none": "x = 1\n",
                 "split-2": program(SPLIT_CU, "init")}
        futs = [ev.submit(name, src) for name, src in progs.items()]
        assert [f.result(timeout=30) for f in futs] == list(progs)
    finally:
        ev._build_pool.shutdown()
    assert started == want


def test_build_order_settings_are_checked():
    from rewards.harness.config import HarnessConfig

    with pytest.raises(ValueError, match="build_order"):
        HarnessConfig.from_mapping({"build_order": "shortest"})
    with pytest.raises(ValueError, match="build_gather_s"):
        HarnessConfig.from_mapping({"build_gather_s": -1})


def test_a_long_stream_of_submits_does_not_hold_the_builds_back(monkeypatch):
    """Submits every 10 ms for 2 s never pause for ``build_gather_s``: the first build still
    starts within 20 pauses (1 s at 0.05 s), not after the stream."""
    ev = Evaluator({"device": "cpu", "build_gather_s": 0.05})
    first: list[float] = []

    def stage(task, src, ctx, fut, t0):
        first.append(time.perf_counter())
        fut.set_result(task)

    monkeypatch.setattr(ev, "_context_future", lambda task, fut: None)
    monkeypatch.setattr(ev, "_stage_build", stage)
    ev._build_pool = cf.ThreadPoolExecutor(1)
    try:
        t0, futs = time.perf_counter(), []
        while time.perf_counter() - t0 < 2.0:
            futs.append(ev.submit(len(futs), "x = 1\n"))
            time.sleep(0.01)
        cf.wait(futs, timeout=30)
    finally:
        ev._build_pool.shutdown()
    assert len(first) == len(futs) and min(first) - t0 < 1.5, (min(first) - t0, len(futs))


@pytest.mark.parametrize("line", [
    "self.f = torch.compile(self.f)",
    'self.f = torch.compile(self.f, mode="max-autotune", fullgraph=True)',
])
def test_a_torch_compile_in_init_is_guessed_longer_than_the_same_build_without(line):
    """torch.compile's first forward runs in the resident place after the build (16-27 s on the
    H100): its build starts before those of equal CUDA that load at once."""
    plain = program(SPLIT_CU, "init")
    compiled = plain.replace("        self.ext = ", f"        {line}\n        self.ext = ")
    assert compiled != plain
    assert buildorder.guess_s(compiled) == buildorder.guess_s(plain) + buildorder.COMPILE_S
    # and before a declined (templated) source's: 11 + 16-27 s against 25-38 s (H100)
    assert buildorder.guess_s(compiled) > buildorder.guess_s(program(TEMPLATED_CU, "init"))


def test_a_decorated_function_counts_and_a_mention_in_text_does_not():
    deco = "import torch\n@torch.compile(mode='reduce-overhead')\ndef f(x):\n    return x + 1\n"
    assert buildorder.guess_s(deco) == buildorder.BASE_S + buildorder.COMPILE_S
    mention = "import torch\n# torch.compile would be faster\nS = 'torch.compile(model)'\n"
    assert buildorder.guess_s(mention) == buildorder.BASE_S
    other = "import re\nP = re.compile('x')\n"  # another module's compile
    assert buildorder.guess_s(other) == buildorder.BASE_S
