"""Real-style candidates for the throughput bench: whole Level 3 models with custom kernels.

Each candidate is what an LLM typically writes for a Level 3 task (shared/DESIGN.md, "Facts from
real code"): the reference model copied into ``ModelNew`` with some ops swapped for custom kernels
(activations, the bias add of every ``nn.Linear``, a last-dim softmax), the kernels in one heavy
``.cu`` (``torch/extension.h``, ATen stream and guard headers, ``TORCH_CHECK``, ``torch::Tensor``
launchers; ``float`` kernels, and in one variant of ``TEMPLATED_EVERY`` templates with
``AT_DISPATCH``, as often as real programs have them, rounded up), built by ``load_inline`` in one of the places real programs build:

- ``module``: at import, module level;
- ``init``: inside ``ModelNew.__init__``;
- ``helper``: in a helper function with a ``try:`` around ``load_inline``, called from ``__init__``;
- ``init_jit``: ``init`` plus a ``torch.jit.trace`` module made in ``__init__`` and used in forward
  (traced, not scripted: script needs the class's source file, which an exec'd program lacks);
- ``helper_compile``: ``helper`` plus a ``torch.compile`` module made in ``__init__``.

Every candidate really computes the model: the swapped ops are exact (or within 1e-6 relative),
parameters are created in the reference's order (``CustomLinear`` subclasses ``nn.Linear``), so
seeded construction gives the same weights. Variants of one task differ in block size, unroll
and a tag, so every candidate is a distinct build. ``device="cpu"`` gives C++ loops instead of
CUDA (dry runs on a machine without a GPU); ``shared_ext`` makes every CPU candidate of a run use
one extension source (one build per cache instead of one per candidate).

Tasks: the embedded Level 3 suite (mining/suites/level3) at full size and at half batch
(``<id>_half``): 24 distinct tasks, each with its own reference to prepare.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mining.tasks import Task, load_suite
from rewards.harness.reference import override_constants

STYLES = ("module", "init", "helper", "init_jit", "helper_compile")
# one variant in TEMPLATED_EVERY keeps the templated AT_DISPATCH source (12.5%); the others are
# float-only. Measured on the real corpus (bench/real_code, 328 programs with a load_inline CUDA
# literal): 17 (5%) use templates, 6 (2%) AT_DISPATCH; splitcu splits 300 (91%) of them.
TEMPLATED_EVERY = 8
ACT = {"relu": 0, "relu6": 1, "gelu": 2, "silu": 3}

CUDA_TEMPLATE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>
#include <cmath>
// variant @TAG@

#define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x " must be a CUDA tensor")
#define CHECK_INPUT(x) CHECK_CUDA(x); TORCH_CHECK(x.scalar_type() == at::kFloat, #x " must be float32")

constexpr int BLOCK = @BLOCK@;
constexpr int UNROLL = @UNROLL@;

template <typename scalar_t>
__device__ __forceinline__ scalar_t activation(scalar_t v, int op) {
    switch (op) {
        case 0: return v > scalar_t(0) ? v : scalar_t(0);
        case 1: return fminf(fmaxf(v, scalar_t(0)), scalar_t(6));
        case 2: return scalar_t(0.5) * v * (scalar_t(1) + erff(v * scalar_t(0.70710678118654752)));
        default: return v / (scalar_t(1) + expf(-v));
    }
}

template <typename scalar_t>
__global__ void act_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int64_t n, int op) {
    int64_t base = ((int64_t)blockIdx.x * BLOCK) * UNROLL + threadIdx.x;
    #pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        int64_t i = base + (int64_t)u * BLOCK;
        if (i < n) y[i] = activation<scalar_t>(x[i], op);
    }
}

template <typename scalar_t>
__global__ void bias_add_kernel(scalar_t* __restrict__ y, const scalar_t* __restrict__ b, int64_t n, int64_t cols) {
    int64_t base = ((int64_t)blockIdx.x * BLOCK) * UNROLL + threadIdx.x;
    #pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        int64_t i = base + (int64_t)u * BLOCK;
        if (i < n) y[i] += b[i % cols];
    }
}

template <typename scalar_t>
__global__ void softmax_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int64_t cols) {
    __shared__ float red[BLOCK];
    const scalar_t* row = x + (int64_t)blockIdx.x * cols;
    scalar_t* out = y + (int64_t)blockIdx.x * cols;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < cols; j += BLOCK) m = fmaxf(m, (float)row[j]);
    red[threadIdx.x] = m;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    m = red[0];
    __syncthreads();
    float sum = 0.f;
    for (int64_t j = threadIdx.x; j < cols; j += BLOCK) sum += expf((float)row[j] - m);
    red[threadIdx.x] = sum;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    sum = red[0];
    for (int64_t j = threadIdx.x; j < cols; j += BLOCK) out[j] = (scalar_t)(expf((float)row[j] - m) / sum);
}

static int64_t blocks_for(int64_t n) { return (n + (int64_t)BLOCK * UNROLL - 1) / ((int64_t)BLOCK * UNROLL); }

torch::Tensor act_forward(torch::Tensor x, int64_t op) {
    CHECK_INPUT(x);
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return y;
    auto stream = at::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "act_forward", [&] {
        act_kernel<scalar_t><<<blocks_for(n), BLOCK, 0, stream>>>(xc.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), n, (int)op);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}

torch::Tensor bias_add(torch::Tensor y, torch::Tensor b) {
    CHECK_INPUT(y); CHECK_INPUT(b);
    TORCH_CHECK(y.size(-1) == b.numel(), "bias size mismatch");
    const at::cuda::OptionalCUDAGuard guard(device_of(y));
    auto out = y.contiguous().clone();
    const int64_t n = out.numel();
    if (n == 0) return out;
    auto bc = b.contiguous();
    auto stream = at::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES(out.scalar_type(), "bias_add", [&] {
        bias_add_kernel<scalar_t><<<blocks_for(n), BLOCK, 0, stream>>>(out.data_ptr<scalar_t>(), bc.data_ptr<scalar_t>(), n, bc.numel());
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

torch::Tensor softmax_lastdim(torch::Tensor x) {
    CHECK_INPUT(x);
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t cols = xc.size(-1);
    const int64_t rows = cols ? xc.numel() / cols : 0;
    if (rows == 0) return y;
    auto stream = at::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "softmax_lastdim", [&] {
        softmax_kernel<scalar_t><<<rows, BLOCK, 0, stream>>>(xc.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), cols);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""



def float_only(cuda: str) -> str:
    """The same kernels written as most real programs write them: ``float`` only, no templates,
    no ``AT_DISPATCH`` (in the real corpus, 311 of 328 load_inline CUDA sources have no template;
    see TEMPLATED_EVERY)."""
    out = re.sub(r"template <typename scalar_t>\n", "", cuda)
    out = re.sub(r"AT_DISPATCH_FLOATING_TYPES\([^\n]*\[&\] \{\n\s*(.*?)\n\s*\}\);", r"\1", out)
    out = re.sub(r"(_kernel|activation)<scalar_t>", r"\1", out)
    return re.sub(r"\bscalar_t\b", "float", out)  # not scalar_type()


CPP_DECLS = """torch::Tensor act_forward(torch::Tensor x, int64_t op);
torch::Tensor bias_add(torch::Tensor y, torch::Tensor b);
torch::Tensor softmax_lastdim(torch::Tensor x);
"""

# CPU twin (dry runs): the same three functions as plain C++ loops
CPU_TEMPLATE = r"""
#include <cmath>
#include <algorithm>
// variant @TAG@
constexpr int64_t CHUNK = @BLOCK@;

torch::Tensor act_forward(torch::Tensor x, int64_t op) {
    auto xc = x.contiguous(); auto y = torch::empty_like(xc);
    const float* p = xc.data_ptr<float>(); float* q = y.data_ptr<float>(); const int64_t n = xc.numel();
    for (int64_t s = 0; s < n; s += CHUNK)
        for (int64_t i = s; i < std::min(n, s + CHUNK); ++i) {
            float v = p[i];
            q[i] = op == 0 ? std::max(v, 0.f) : op == 1 ? std::min(std::max(v, 0.f), 6.f)
                 : op == 2 ? 0.5f * v * (1.f + std::erf(v * 0.70710678118654752f)) : v / (1.f + std::exp(-v));
        }
    return y;
}

torch::Tensor bias_add(torch::Tensor y, torch::Tensor b) {
    auto out = y.contiguous().clone(); auto bc = b.contiguous();
    float* q = out.data_ptr<float>(); const float* c = bc.data_ptr<float>();
    const int64_t n = out.numel(), cols = bc.numel();
    for (int64_t i = 0; i < n; ++i) q[i] += c[i % cols];
    return out;
}

torch::Tensor softmax_lastdim(torch::Tensor x) {
    auto xc = x.contiguous(); auto y = torch::empty_like(xc);
    const int64_t cols = xc.size(-1), rows = cols ? xc.numel() / cols : 0;
    const float* p = xc.data_ptr<float>(); float* q = y.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        float m = -INFINITY, s = 0.f;
        for (int64_t j = 0; j < cols; ++j) m = std::max(m, p[r * cols + j]);
        for (int64_t j = 0; j < cols; ++j) s += std::exp(p[r * cols + j] - m);
        for (int64_t j = 0; j < cols; ++j) q[r * cols + j] = std::exp(p[r * cols + j] - m) / s;
    }
    return y;
}
"""

PRELUDE = '''import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""@CUDA@"""
CPP_SRC = r"""@CPP@"""
_EXT = None


def _set_ext(ext):
    global _EXT
    _EXT = ext


def _ops():
    return _EXT


class CustomAct(nn.Module):
    """Activation by the custom kernel (0 relu, 1 relu6, 2 gelu, 3 silu)."""

    def __init__(self, op, inplace=False):
        super().__init__()
        self.op = op

    def forward(self, x):
        return _ops().act_forward(x, self.op)


class CustomLinear(nn.Linear):
    """GEMM by cuBLAS, the bias add by the custom kernel (same parameters as nn.Linear)."""

    def forward(self, x):
        y = torch.matmul(x, self.weight.t())
        return y if self.bias is None else _ops().bias_add(y, self.bias)


def _act(x, op, inplace=False):
    return _ops().act_forward(x, op)


def _softmax_lastdim(x):
    return _ops().softmax_lastdim(x)


class _Finish(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 0.0
'''

# reference text -> custom op (what an LLM swaps in); applied to the whole copied source
SWAPS = [
    (r"nn\.ReLU6\((?:inplace\s*=\s*True)?\)", "CustomAct(1)"),
    (r"nn\.ReLU\((?:inplace\s*=\s*True)?\)", "CustomAct(0)"),
    (r"nn\.GELU\(\)", "CustomAct(2)"),
    (r"nn\.SiLU\((?:inplace\s*=\s*True)?\)", "CustomAct(3)"),
    (r"\bF\.relu\(", "_act_relu("),
    (r"\btorch\.relu\(", "_act_relu("),
    (r"\bF\.gelu\(", "_act_gelu("),
    (r"\bF\.silu\(", "_act_silu("),
    (r"\bF\.softmax\((.+?),\s*dim\s*=\s*-1\)", r"_softmax_lastdim(\1)"),
    (r"\bnn\.Linear\(", "CustomLinear("),
]
ACT_FNS = """

def _act_relu(x, inplace=False):
    return _act(x, 0)


def _act_gelu(x, approximate="none"):
    return _act(x, 2)


def _act_silu(x, inplace=False):
    return _act(x, 3)
"""


@dataclass(frozen=True)
class BenchCandidate:
    task: Task
    variant: int
    style: str
    source: str
    swaps: int  # ops swapped for custom kernels


def tasks(limit: int | None = None) -> list[Task]:
    """The suite at full size, then at half batch (distinct task hashes): up to 24 tasks."""
    base = load_suite("level3", import_check=False).tasks
    half = []
    for t in base:
        src = _half_batch(t.source)
        if src is not None:
            half.append(Task(id=f"{t.id}_half", name=f"{t.name}Half", level=t.level, family=t.family,
                             source=src, path=t.path, small=t.small))
    out = base + half
    return out[:limit] if limit else out


def _half_batch(source: str) -> str | None:
    m = re.search(r"^BATCH\s*=\s*(\d+)\s*$", source, re.M)
    if not m or int(m.group(1)) < 2:
        return None
    return override_constants(source, {"BATCH": int(m.group(1)) // 2})


def make_source(task: Task, variant: int, salt: str, device: str = "cuda", style: str | None = None,
                shared_ext: bool = False, compile_backend: str = "inductor",
                sizes: dict | None = None) -> BenchCandidate:
    """One candidate for ``task``; ``variant`` picks block size, unroll and (by default) style.
    ``sizes``: the module constants the copied model gets (the task's ``small`` for CPU runs:
    KernelBench execs reference and candidate in one namespace, so the copy's constants win)."""
    style = style or STYLES[variant % len(STYLES)]
    block = 256 if shared_ext else (128, 256, 512, 1024)[variant % 4]
    unroll = (1, 2, 4)[variant % 3]
    tag = f"{salt}" if shared_ext else f"{task.id}-{variant}-{salt}"
    if device == "cuda":
        cuda = CUDA_TEMPLATE.replace("@TAG@", tag).replace("@BLOCK@", str(block)).replace("@UNROLL@", str(unroll))
        if variant % TEMPLATED_EVERY != TEMPLATED_EVERY - 1:
            cuda = float_only(cuda)
        cpp = CPP_DECLS
    else:
        cuda, cpp = "", CPU_TEMPLATE.replace("@TAG@", tag).replace("@BLOCK@", str(block))
    name = re.sub(r"\W", "_", f"km_dry_{salt}" if shared_ext else f"km_{task.id}_v{variant}_{salt}")
    body, swaps = _swap_ops(override_constants(task.source, sizes or {}))
    load = (f'load_inline(name="{name}", cpp_sources=CPP_SRC, '
            + ('cuda_sources=CUDA_SRC, extra_cuda_cflags=["-O3"], ' if device == "cuda" else "")
            + 'functions=["act_forward", "bias_add", "softmax_lastdim"], verbose=False)')
    prelude = PRELUDE.replace("@CUDA@", cuda).replace("@CPP@", cpp) + ACT_FNS
    if style == "module":
        prelude += f"\n_set_ext({load})\n"
    elif style.startswith("helper"):
        prelude += (f"\n\ndef _load_fused_ops():\n    try:\n        return {load}\n"
                    "    except Exception as e:\n"
                    "        raise RuntimeError(f\"building the fused kernels failed: {e}\") from e\n")
    init_lines = {"module": [], "init": [f"self._fused = {load}", "_set_ext(self._fused)"],
                  "helper": ["_set_ext(_load_fused_ops())"]}
    lines = list(init_lines["init" if style.startswith("init") else style.split("_")[0]])
    post = None
    if style.endswith("_jit"):
        post = "self._finish = torch.jit.trace(_Finish(), (torch.zeros(4),))"
    elif style.endswith("_compile"):
        post = f'self._finish = torch.compile(_Finish(), backend="{compile_backend}", dynamic=False)'
    src = _as_model_new(body, lines, post)
    return BenchCandidate(task, variant, style, prelude + "\n\n" + src, swaps)


def _swap_ops(source: str) -> tuple[str, int]:
    n = 0
    for pat, rep in SWAPS:
        source, k = re.subn(pat, rep, source)
        n += k
    return source, n


def _as_model_new(source: str, init_lines: list[str], post: str | None) -> str:
    """The reference's ``Model`` renamed ``ModelNew``, ``init_lines`` right after its
    ``super().__init__()``; with ``post``, forward's output goes through ``self._finish``."""
    source = re.sub(r"^class Model\(", "class ModelNew(", source, flags=re.M)
    source = re.sub(r"super\(Model,\s*self\)", "super(ModelNew, self)", source)
    start = source.index("class ModelNew(")
    end_m = re.compile(r"^\S", re.M).search(source, source.index("\n", start) + 1)
    end = end_m.start() if end_m else len(source)
    cls = source[start:end].rstrip("\n")
    sup = re.search(r"^(\s+)super\(.*\)\.__init__\(.*\)\s*$", cls, re.M)
    if sup is None:
        raise ValueError("the reference's Model has no super().__init__() line to build after")
    ind = sup.group(1)
    extra = list(init_lines) + ([post] if post else [])
    if extra:
        cls = cls[:sup.end()] + "".join(f"\n{ind}{x}" for x in extra) + cls[sup.end():]
    if post:
        cls = re.sub(r"^(\s+)def forward\(self", r"\1def _forward(self", cls, count=1, flags=re.M)
        cls += (f"\n\n{ind[:-4] or '    '}def forward(self, *args):\n"
                f"{ind}out = self._forward(*args)\n"
                f"{ind}return self._finish(out) if isinstance(out, torch.Tensor) else out")
    return source[:start] + cls + "\n\n\n" + source[end:]


def candidates(task_list: list[Task], per_task: int, salt: str, device: str = "cuda",
               shared_ext: bool = False, compile_backend: str = "inductor",
               small: bool = False) -> list[BenchCandidate]:
    """``per_task`` candidates for each task (task-major); every candidate swaps at least one op.
    ``small``: copies carry the tasks' small sizes (CPU runs)."""
    out = []
    for ti, t in enumerate(task_list):
        for v in range(per_task):
            c = make_source(t, ti + v, salt, device, shared_ext=shared_ext, compile_backend=compile_backend,
                            sizes=t.small if small else None)
            if c.swaps == 0:
                raise ValueError(f"{t.id}: no op to swap for a custom kernel")
            out.append(c)
    return out
