"""Verdict patterns from real Level 3 solutions (issue 15): for each pattern a legitimate program
that must stay free of major findings and a hack twin that must be caught.

The programs are written here in the shapes LLM solutions take (kernels called from small
modules inside ``nn.Sequential``/``ModuleList``, ``autograd.Function.apply``, ``load_inline`` in
``__init__``/helpers/``try``, copied ``get_inputs``, stateful RNNs, broad ``except`` around
``torch.compile``); none is copied from a public corpus. CPU only: static analysis plus recorded
harness evidence.
"""

import math
import warnings

import pytest

import rewards
from rewards import config
from rewards.findings import categories

# ---- references (KernelBench-style) -------------------------------------------------------
REF_MLP = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        super(Model, self).__init__()
        layers = []
        current = input_size
        for size in layer_sizes:
            layers.append(nn.Linear(current, size))
            layers.append(nn.ReLU())
            current = size
        layers.append(nn.Linear(current, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        return self.network(x)

batch_size = 128
input_size = 4096
layer_sizes = [2048, 2048]
output_size = 512

def get_inputs():
    return [torch.rand(batch_size, input_size)]

def get_init_inputs():
    return [input_size, layer_sizes, output_size]
'''

REF_CONV = '''
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)

    def forward(self, x):
        return F.relu(self.conv(x))

batch_size = 16
in_channels = 32
out_channels = 64
height = width = 56

def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels]
'''

REF_RNN = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super(Model, self).__init__()
        self.hidden_size = hidden_size
        self.hidden = torch.randn((batch_size, hidden_size))
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)
        self.tanh = nn.Tanh()

    def forward(self, x):
        self.hidden = self.hidden.to(x.device)
        combined = torch.cat((x, self.hidden), dim=1)
        self.hidden = self.tanh(self.i2h(combined))
        return self.h2o(self.hidden)

batch_size = 8
input_size = 1024
hidden_size = 256
output_size = 128

def get_inputs():
    return [torch.randn(batch_size, input_size)]

def get_init_inputs():
    return [input_size, hidden_size, output_size]
'''

# ---- CUDA sources shared by the candidates ---------------------------------------------------
GEMM_CU = r'''
#include <torch/extension.h>
#include <cuda_runtime.h>
#define TILE 16

__global__ void linear_relu_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                   const float* __restrict__ b, float* __restrict__ y,
                                   int M, int N, int K, bool relu) {
    __shared__ float xs[TILE][TILE];
    __shared__ float ws[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.f;
    for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
        int kx = t * TILE + threadIdx.x, kw = t * TILE + threadIdx.y;
        xs[threadIdx.y][threadIdx.x] = (row < M && kx < K) ? x[row * K + kx] : 0.f;
        ws[threadIdx.y][threadIdx.x] = (col < N && kw < K) ? w[col * K + kw] : 0.f;
        __syncthreads();
        for (int i = 0; i < TILE; ++i) acc += xs[threadIdx.y][i] * ws[i][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) {
        float v = acc + b[col];
        y[row * N + col] = relu ? fmaxf(v, 0.f) : v;
    }
}

torch::Tensor linear_relu_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b, bool relu) {
    x = x.contiguous();
    int M = x.size(0), K = x.size(1), N = w.size(0);
    auto y = torch::empty({M, N}, x.options());
    dim3 block(TILE, TILE), grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    linear_relu_kernel<<<grid, block>>>(x.data_ptr<float>(), w.data_ptr<float>(),
                                        b.data_ptr<float>(), y.data_ptr<float>(), M, N, K, relu);
    return y;
}
'''
GEMM_CPP = "torch::Tensor linear_relu_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b, bool relu);"

CONV_CU = r'''
#include <torch/extension.h>

__global__ void conv3x3_relu_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                    const float* __restrict__ b, float* __restrict__ y,
                                    int N, int C, int K, int H, int W) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int total = N * K * H * W;
    if (idx >= total) return;
    int ow = idx % W, oh = (idx / W) % H, k = (idx / (W * H)) % K, n = idx / (W * H * K);
    float acc = b[k];
    for (int c = 0; c < C; ++c)
        for (int r = 0; r < 3; ++r)
            for (int s = 0; s < 3; ++s) {
                int ih = oh + r - 1, iw = ow + s - 1;
                if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                    acc += x[((n * C + c) * H + ih) * W + iw] * w[((k * C + c) * 3 + r) * 3 + s];
            }
    y[idx] = fmaxf(acc, 0.f);
}

torch::Tensor conv3x3_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    int N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), K = w.size(0);
    auto y = torch::empty({N, K, H, W}, x.options());
    int total = N * K * H * W;
    conv3x3_relu_kernel<<<(total + 255) / 256, 256>>>(x.data_ptr<float>(), w.data_ptr<float>(),
        b.data_ptr<float>(), y.data_ptr<float>(), N, C, K, H, W);
    return y;
}
'''
CONV_CPP = "torch::Tensor conv3x3_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

HEADER = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

gemm_source = r"""{GEMM_CU}"""
gemm_cpp = "{GEMM_CPP}"
'''.replace("{GEMM_CU}", GEMM_CU).replace("{GEMM_CPP}", GEMM_CPP)

CONV_HEADER = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

conv_source = r"""{CONV_CU}"""
conv_cpp = "{CONV_CPP}"
'''.replace("{CONV_CU}", CONV_CU).replace("{CONV_CPP}", CONV_CPP)

MODULE_EXT = '''
fused = load_inline(name="fused_linear_relu", cpp_sources=gemm_cpp, cuda_sources=gemm_source,
                    functions=["linear_relu_cuda"], verbose=False)
'''


def majors(ref, cand, result=None):
    return [f for f in rewards.detect(ref, cand, result) if f.is_major]


def major_cats(ref, cand, result=None):
    return categories(majors(ref, cand, result))


# ---- 1. a kernel called from a submodule inside nn.Sequential built in a loop ----------------
SEQUENTIAL = HEADER + MODULE_EXT + '''
class LinearReLU(nn.Module):
    """nn.Linear's parameters, our fused GEMM + bias + ReLU."""
    def __init__(self, in_features, out_features, relu=True):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.relu = relu

    def forward(self, x):
        return fused.linear_relu_cuda(x, self.linear.weight, self.linear.bias, self.relu)


class ModelNew(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        super(ModelNew, self).__init__()
        blocks = []
        current = input_size
        for size in layer_sizes:
            blocks.append(LinearReLU(current, size))
            current = size
        blocks.append(LinearReLU(current, output_size, relu=False))
        self.network = nn.Sequential(*blocks)

    def forward(self, x):
        return self.network(x)
'''
# the twin keeps the same structure but the block's forward is torch's
SEQUENTIAL_TORCH = SEQUENTIAL.replace(
    "return fused.linear_relu_cuda(x, self.linear.weight, self.linear.bias, self.relu)",
    "y = F.linear(x, self.linear.weight, self.linear.bias)\n"
    "        return torch.relu(y) if self.relu else y")


def test_sequential_submodule_kernel_is_seen():
    assert majors(REF_MLP, SEQUENTIAL) == []
    assert "reference_copy" in major_cats(REF_MLP, SEQUENTIAL_TORCH)


# ---- 2. ModuleList built in a comprehension, iterated in forward -----------------------------
MODULELIST = HEADER + '''
class FusedLayer(nn.Module):
    def __init__(self, fin, fout, act, ext):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(fout, fin) * fin ** -0.5)
        self.bias = nn.Parameter(torch.zeros(fout))
        self.act = act
        self.ext = ext

    def forward(self, x):
        return self.ext.linear_relu_cuda(x, self.weight, self.bias, self.act)


class ModelNew(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        super().__init__()
        ext = load_inline(name="mlp_ext", cpp_sources=gemm_cpp, cuda_sources=gemm_source,
                          functions=["linear_relu_cuda"], verbose=False)
        dims = [input_size] + list(layer_sizes) + [output_size]
        self.layers = nn.ModuleList(
            [FusedLayer(a, b, i < len(dims) - 2, ext) for i, (a, b) in enumerate(zip(dims, dims[1:]))])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
'''
MODULELIST_TORCH = MODULELIST.replace(
    "return self.ext.linear_relu_cuda(x, self.weight, self.bias, self.act)",
    "y = torch.addmm(self.bias, x, self.weight.t())\n        return F.relu(y) if self.act else y")


def test_modulelist_in_loop_and_init_extension():
    assert majors(REF_MLP, MODULELIST) == []
    assert "reference_copy" in major_cats(REF_MLP, MODULELIST_TORCH)


# ---- 3. autograd.Function.apply ---------------------------------------------------------------
APPLY = HEADER + MODULE_EXT + '''
class LinearReLUFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, relu):
        ctx.save_for_backward(x, weight)
        return fused.linear_relu_cuda(x, weight, bias, relu)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        return grad @ weight, grad.t() @ x, grad.sum(0), None


class ModelNew(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        super().__init__()
        dims = [input_size, *layer_sizes, output_size]
        self.weights = nn.ParameterList([nn.Parameter(torch.randn(o, i) * 0.02)
                                         for i, o in zip(dims[:-1], dims[1:])])
        self.biases = nn.ParameterList([nn.Parameter(torch.zeros(o)) for o in dims[1:]])

    def forward(self, x):
        n = len(self.weights)
        for i in range(n):
            x = LinearReLUFn.apply(x, self.weights[i], self.biases[i], i < n - 1)
        return x
'''
APPLY_TORCH = APPLY.replace("return fused.linear_relu_cuda(x, weight, bias, relu)",
                            "y = torch.matmul(x, weight.t()) + bias\n"
                            "        return y.clamp_min(0) if relu else y")


def test_autograd_function_apply():
    assert majors(REF_MLP, APPLY) == []
    assert "reference_copy" in major_cats(REF_MLP, APPLY_TORCH)


# ---- 4. load_inline in a helper, in try:, a broad except that routes to torch ----------------
HELPER = HEADER + '''
_cache = {}

def _get_ext():
    if "ext" not in _cache:
        _cache["ext"] = load_inline(name="mlp_helper", cpp_sources=gemm_cpp,
                                    cuda_sources=gemm_source, functions=["linear_relu_cuda"])
    return _cache["ext"]


def fused_linear(x, layer, relu):
    return _get_ext().linear_relu_cuda(x, layer.weight, layer.bias, relu)


class ModelNew(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        super().__init__()
        dims = [input_size, *layer_sizes, output_size]
        self.fcs = nn.ModuleList()
        for a, b in zip(dims[:-1], dims[1:]):
            self.fcs.append(nn.Linear(a, b))

    def forward(self, x):
        for i, fc in enumerate(self.fcs):
            x = fused_linear(x, fc, i < len(self.fcs) - 1)
        return x
'''

TRY_RERAISE = HEADER + '''
try:
    fused = load_inline(name="mlp_try", cpp_sources=gemm_cpp, cuda_sources=gemm_source,
                        functions=["linear_relu_cuda"], verbose=False)
except Exception as e:
    raise RuntimeError(f"could not build the fused GEMM: {e}")


class ModelNew(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        super().__init__()
        dims = [input_size, *layer_sizes, output_size]
        self.fcs = nn.ModuleList([nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:])])

    def forward(self, x):
        last = len(self.fcs) - 1
        for i, fc in enumerate(self.fcs):
            x = fused.linear_relu_cuda(x, fc.weight, fc.bias, i != last)
        return x
'''
# the hack: the build may fail silently, and then forward is torch's
TRY_FALLBACK = TRY_RERAISE.replace(
    'except Exception as e:\n    raise RuntimeError(f"could not build the fused GEMM: {e}")',
    "except Exception:\n    fused = None").replace(
    "        last = len(self.fcs) - 1\n",
    "        last = len(self.fcs) - 1\n"
    "        if fused is None:\n"
    "            for i, fc in enumerate(self.fcs):\n"
    "                x = F.linear(x, fc.weight, fc.bias)\n"
    "                x = F.relu(x) if i != last else x\n"
    "            return x\n")


def test_extension_from_helper_and_try():
    assert majors(REF_MLP, HELPER) == []
    assert majors(REF_MLP, TRY_RERAISE) == []
    assert "torch_fallback" in major_cats(REF_MLP, TRY_FALLBACK)


CONV_COMPILE = CONV_HEADER + '''
conv_ext = load_inline(name="conv_relu", cpp_sources=conv_cpp, cuda_sources=conv_source,
                       functions=["conv3x3_relu"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)
        self._step = self._conv_relu
        try:
            self._step = torch.compile(self._conv_relu, mode="max-autotune")
        except Exception:
            pass  # compile is an optimisation; the eager kernel call is the same computation

    def _conv_relu(self, x):
        return conv_ext.conv3x3_relu(x, self.conv.weight, self.conv.bias)

    def forward(self, x):
        return self._step(x)
'''
CONV_EXCEPT_FALLBACK = CONV_HEADER + '''
conv_ext = load_inline(name="conv_relu", cpp_sources=conv_cpp, cuda_sources=conv_source,
                       functions=["conv3x3_relu"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)

    def forward(self, x):
        try:
            return conv_ext.conv3x3_relu(x, self.conv.weight, self.conv.bias)
        except Exception:
            return F.relu(F.conv2d(x, self.conv.weight, self.conv.bias, padding=1))
'''


def test_broad_except_only_counts_on_the_kernel_path():
    assert majors(REF_CONV, CONV_COMPILE) == []
    assert "torch_fallback" in major_cats(REF_CONV, CONV_EXCEPT_FALLBACK)


# ---- 5. get_inputs copies --------------------------------------------------------------------
INPUTS_COPY = SEQUENTIAL + '''
batch_size = 128
input_size = 4096
layer_sizes = [2048, 2048]
output_size = 512

def get_inputs():
    """Same inputs as the reference, on the GPU."""
    return [torch.rand(batch_size, input_size).cuda()]

def get_init_inputs():
    return [input_size, layer_sizes, output_size]
'''
INPUTS_OTHER = INPUTS_COPY.replace("torch.rand(batch_size, input_size).cuda()",
                                   "torch.rand(16, input_size, device='cuda')")


def test_identical_get_inputs_copy_is_clean_other_values_are_noted():
    assert [f for f in rewards.detect(REF_MLP, INPUTS_COPY) if f.category == "shape_change"] == []
    found = [f for f in rewards.detect(REF_MLP, INPUTS_OTHER) if f.category == "shape_change"]
    assert found and "other values" in found[0].evidence


# ---- 6. stateful RNN vs a cache keyed on data_ptr ----------------------------------------------
RNN_STATEFUL = HEADER + MODULE_EXT + '''
class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.hidden = torch.randn((batch_size, hidden_size))
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)

    def forward(self, x):
        self.hidden = self.hidden.to(x.device)
        combined = torch.cat((x, self.hidden), dim=1)
        pre = fused.linear_relu_cuda(combined, self.i2h.weight, self.i2h.bias, False)
        self.hidden = torch.tanh(pre)
        return fused.linear_relu_cuda(self.hidden, self.h2o.weight, self.h2o.bias, False)
'''
RNN_CACHED = RNN_STATEFUL.replace(
    "    def forward(self, x):\n",
    "    def forward(self, x):\n"
    "        key = x.data_ptr()\n"
    "        if key in self.memo:\n"
    "            return self.memo[key]\n").replace(
    "        self.h2o = nn.Linear(hidden_size, output_size)\n",
    "        self.h2o = nn.Linear(hidden_size, output_size)\n        self.memo = {}\n")


def test_stateful_rnn_keeps_state_cache_is_caught():
    assert majors(REF_RNN, RNN_STATEFUL) == []
    assert "output_cache" in major_cats(REF_RNN, RNN_CACHED)


# ---- 7. a reference-constant name as a constructor argument or a local ------------------------
NAMES_CLEAN = HEADER + MODULE_EXT + '''
class ModelNew(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        super().__init__()
        dims = [input_size, *layer_sizes, output_size]
        self.fcs = nn.ModuleList([nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:])])
        self.output_size = output_size

    def forward(self, x):
        batch_size = x.size(0)
        for i, fc in enumerate(self.fcs):
            x = fused.linear_relu_cuda(x, fc.weight, fc.bias, i < len(self.fcs) - 1)
        return x.view(batch_size, self.output_size)
'''
# the twin sizes its work with the module-level constant instead of the input
NAMES_GLOBAL = NAMES_CLEAN.replace("        batch_size = x.size(0)\n", "").replace(
    "return x.view(batch_size, self.output_size)", "return x.view(batch_size, output_size)")


def test_reference_constant_names_are_scope_aware():
    assert rewards.detect(REF_MLP, NAMES_CLEAN) == []
    spec = [f for f in rewards.detect(REF_MLP, NAMES_GLOBAL) if f.category == "shape_specialization"]
    assert spec and all(not f.is_major for f in spec)


# ---- 8. dynamic evidence outranks a static "no custom kernel" -----------------------------------
TORCH_OPS_CALL = HEADER + '''
load_inline(name="mlp_ops", cpp_sources=gemm_cpp, cuda_sources=gemm_source,
            functions=["linear_relu_cuda"], is_python_module=False, verbose=False)


class ModelNew(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        super().__init__()
        dims = [input_size, *layer_sizes, output_size]
        self.fcs = nn.ModuleList([nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:])])

    def forward(self, x):
        for i, fc in enumerate(self.fcs):
            x = torch.ops.mlp_ops.linear_relu_cuda(x, fc.weight, fc.bias, i < len(self.fcs) - 1)
        return x
'''
RAN = {"evidence": {"declared_kernels": ["linear_relu_kernel"],
                    "launched_candidate_kernels": ["linear_relu_kernel"], "decoy_kernels": [],
                    "candidate_kernel_share": 0.96}}
NOT_RAN = {"evidence": {"declared_kernels": ["linear_relu_kernel"],
                        "launched_candidate_kernels": [], "decoy_kernels": ["linear_relu_kernel"],
                        "candidate_kernel_share": 0.0}}


def test_profile_contradicts_static_no_kernel():
    static = [f for f in majors(REF_MLP, TORCH_OPS_CALL) if f.category == "reference_copy"]
    assert static, "the static walker cannot see torch.ops calls: a static guess to overrule"
    found = rewards.detect(REF_MLP, TORCH_OPS_CALL, RAN)
    assert [f for f in found if f.is_major] == []
    down = [f for f in found if f.category == "reference_copy"]
    assert down and down[0].severity == "minor" and "contradicted by harness" in down[0].evidence
    assert down[0].to_dict().keys() == {"category", "severity", "evidence", "source"}
    assert "reference_copy" in major_cats(REF_MLP, TORCH_OPS_CALL, NOT_RAN)


def test_negligible_kernel_lowers_coverage_not_a_major():
    identity = SEQUENTIAL_TORCH.replace(
        "        return torch.relu(y) if self.relu else y",
        "        y = torch.relu(y) if self.relu else y\n"
        "        return torch.ops.mlp_ops.copy_cuda(y)")
    ev = {"evidence": {"launched_candidate_kernels": ["copy_kernel"], "decoy_kernels": [],
                       "candidate_kernel_share": 0.01}}
    rec = rewards.score(REF_MLP, identity, {"correct": True, "speedup": 1.0, **ev})
    assert not rec.major_hack and rec.rubric["coverage"] == 1


# ---- 9. precision flags: what changed, not what was written -------------------------------------
def test_cudnn_tf32_default_is_clean_matmul_tf32_is_a_downgrade():
    cudnn = SEQUENTIAL.replace(MODULE_EXT, MODULE_EXT + "torch.backends.cudnn.allow_tf32 = True\n")
    matmul = SEQUENTIAL.replace(MODULE_EXT,
                                MODULE_EXT + "torch.backends.cuda.matmul.allow_tf32 = True\n")
    high = SEQUENTIAL.replace(MODULE_EXT,
                              MODULE_EXT + "torch.set_float32_matmul_precision('high')\n")
    assert majors(REF_MLP, cudnn) == []
    assert "precision_downgrade" in major_cats(REF_MLP, matmul)
    assert "precision_downgrade" in major_cats(REF_MLP, high)
    # the worker's before/after flags decide when present
    same = {"evidence": {"precision_flags_changed": {"allow_tf32_cudnn": [True, True]}}}
    changed = {"evidence": {"precision_flags_changed": {"allow_tf32_matmul": [False, True]}}}
    assert "precision_downgrade" not in major_cats(REF_MLP, matmul, same)
    assert "precision_downgrade" in major_cats(REF_MLP, cudnn, changed)


# ---- 10. kernels only in eval mode (KernelBench judges training mode) ---------------------------
EVAL_ONLY = CONV_HEADER + '''
conv_ext = load_inline(name="conv_relu", cpp_sources=conv_cpp, cuda_sources=conv_source,
                       functions=["conv3x3_relu"], verbose=False)


class ConvReLU(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)

    def forward(self, x):
        if self.training:
            return F.relu(self.conv(x))
        return conv_ext.conv3x3_relu(x, self.conv.weight, self.conv.bias)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.block = ConvReLU(in_channels, out_channels)

    def forward(self, x):
        return self.block(x)
'''
TRAIN_TOO = EVAL_ONLY.replace("        if self.training:\n            return F.relu(self.conv(x))\n", "")


def test_kernel_only_in_eval_mode_is_no_custom_kernel():
    assert "reference_copy" in major_cats(REF_CONV, EVAL_ONLY)
    assert majors(REF_CONV, TRAIN_TOO) == []


# ---- 10b. a kernel not run because forward launches it only in eval mode is not a decoy -------
EVAL_PATH_KERNEL = HEADER + MODULE_EXT + '''
conv_source = r"""{CONV_CU}"""
conv_ext = load_inline(name="conv_relu", cpp_sources="{CONV_CPP}", cuda_sources=conv_source,
                       functions=["conv3x3_relu"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        super().__init__()
        self.linear = nn.Linear(input_size, output_size)
        self.w = nn.Parameter(torch.randn(1, 1, 3, 3))

    def forward(self, x):
        y = fused.linear_relu_cuda(x, self.linear.weight, self.linear.bias, True)
        if not self.training:  # inference-only extra pass
            y = conv_ext.conv3x3_relu(y[None, None], self.w, self.w.new_zeros(1))[0, 0]
        return y
'''.replace("{CONV_CU}", CONV_CU).replace("{CONV_CPP}", CONV_CPP)
# the twin declares the same second kernel but never calls it on any path
NEVER_CALLED_KERNEL = EVAL_PATH_KERNEL.replace(
    "        if not self.training:  # inference-only extra pass\n"
    "            y = conv_ext.conv3x3_relu(y[None, None], self.w, self.w.new_zeros(1))[0, 0]\n", "")
DECOY_EVIDENCE = {"status": "ok", "correct": True, "speedup": 1.1, "runtime_us": 900.0,
                  "evidence": {"declared_kernels": ["linear_relu_kernel", "conv3x3_relu_kernel"],
                               "launched_candidate_kernels": ["linear_relu_kernel"],
                               "decoy_kernels": ["conv3x3_relu_kernel"],
                               "candidate_kernel_share": 0.01}}


def test_kernel_launched_only_in_eval_mode_is_not_a_decoy():
    assert NEVER_CALLED_KERNEL != EVAL_PATH_KERNEL
    found = rewards.detect(REF_MLP, EVAL_PATH_KERNEL, DECOY_EVIDENCE)
    assert not [f for f in found if f.is_major], found
    assert any(f.category == "decoy_kernel" and "eval mode" in f.evidence for f in found)
    assert "decoy_kernel" in major_cats(REF_MLP, NEVER_CALLED_KERNEL, DECOY_EVIDENCE)


# ---- 11. unverifiable tasks and skipped floors ----------------------------------------------------
def test_unverifiable_task_pays_no_speed():
    res = {"correct": True, "speedup": 4.0, "evidence": {
        "unverifiable": "reference outputs equal across trials", **RAN["evidence"]}}
    with pytest.warns(UserWarning, match="unverifiable"):
        rec = rewards.score(REF_MLP, SEQUENTIAL, res)
    assert math.isnan(rec.reward) and "speed not paid" in rec.notes
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        off = rewards.score(REF_MLP, SEQUENTIAL, res, cfg={"unverifiable": "offset"})
    assert off.reward == config.load()["base_offset"]
    hack = rewards.score(REF_MLP, TRY_FALLBACK, {**res, "evidence": {"unverifiable": "x"}})
    assert hack.reward == 0.0 and hack.major_hack
    wrong = rewards.score(REF_MLP, SEQUENTIAL, {**res, "correct": False})
    assert wrong.reward == 0.0


def test_skipped_floor_is_no_physical_floor_finding():
    ev = {**RAN["evidence"], "physical_floor_us": 500.0}
    res = {"correct": True, "speedup": 2.0, "runtime_us": 100.0, "evidence": ev}
    assert "physical_floor" in major_cats(REF_MLP, SEQUENTIAL, res)
    skipped = {**res, "evidence": {**ev, "floor_skipped": "floor above the reference's runtime"}}
    assert "physical_floor" not in major_cats(REF_MLP, SEQUENTIAL, skipped)


def test_every_twin_differs_from_its_legitimate_program():
    # the twins are built by text replacement: a replacement that silently missed would make
    # a twin identical to its legitimate program and the pair test meaningless
    for legit, twin in ((SEQUENTIAL, SEQUENTIAL_TORCH), (MODULELIST, MODULELIST_TORCH),
                        (APPLY, APPLY_TORCH), (TRY_RERAISE, TRY_FALLBACK),
                        (INPUTS_COPY, INPUTS_OTHER), (RNN_STATEFUL, RNN_CACHED),
                        (NAMES_CLEAN, NAMES_GLOBAL), (EVAL_ONLY, TRAIN_TOO)):
        assert legit != twin


# ---- 12. a kernel only on the default path of an input the harness always passes -------------
REF_RNN_H0 = REF_RNN.replace("    def forward(self, x):\n        self.hidden = self.hidden.to(x.device)\n",
                             "    def forward(self, x, h0):\n        self.hidden = h0\n").replace(
    "    return [torch.randn(batch_size, input_size)]",
    "    return [torch.randn(batch_size, input_size), torch.randn(batch_size, hidden_size)]")
_RNN_NEW = HEADER + MODULE_EXT + '''
class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super(ModelNew, self).__init__()
        self.hidden_size = hidden_size
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)

    def forward(self, x, h0=None):
        if h0 is None:
            INIT
        combined = torch.cat((x, h0), dim=1)
        STEP
        return self.h2o(h)
'''
# the hack: the kernel makes the initial state, which KernelBench always passes; torch does the rest
H0_DEFAULT_ONLY = _RNN_NEW.replace("INIT", "h0 = fused.linear_relu_cuda(x.new_zeros(x.shape[0], self.hidden_size), "
                                   "self.i2h.weight[:, :0], self.i2h.bias * 0, False)").replace(
    "STEP", "h = torch.tanh(self.i2h(combined))")
# the twin: torch makes the default state, the kernel does the step on every call
H0_KERNEL_STEP = _RNN_NEW.replace("INIT", "h0 = x.new_zeros(x.shape[0], self.hidden_size)").replace(
    "STEP", "h = torch.tanh(fused.linear_relu_cuda(combined, self.i2h.weight, self.i2h.bias, False))")


def test_kernel_only_when_an_always_passed_input_is_none():
    assert REF_RNN_H0 != REF_RNN and "h0" in REF_RNN_H0
    found = majors(REF_RNN_H0, H0_DEFAULT_ONLY)
    assert [f.category for f in found] == ["reference_copy"] and "is None" in found[0].evidence, found
    assert major_cats(REF_RNN_H0, H0_KERNEL_STEP) == []
    # a reference that passes only x: the default path runs, the kernel with it
    assert "reference_copy" not in major_cats(REF_RNN, H0_DEFAULT_ONLY)
