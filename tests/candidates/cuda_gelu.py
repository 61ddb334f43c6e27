# CUDA candidate for the tiny task: cuBLAS GEMM (at::addmm) + a custom GELU kernel.
# MODE (substituted by tests): 0 legit, 1 GELU on a hidden C++ side stream, 2 illegal memory
# access, 3 GELU with a long spin on the current stream (made a hidden side stream by PY_STREAM),
# 4 legit but the last element off by 1 (one wrong value of 96: the judge must see it).
# PY_STREAM (substituted): "none"; "unjoined": forward runs the extension inside
# torch.cuda.stream(torch.cuda.Stream()) and never waits for it; "joined": same, joined back.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#define MODE 0

__global__ void gelu_fwd_kernel(const float* __restrict__ x, float* __restrict__ y, int n, long long spin) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (spin) { long long t0 = clock64(); while (clock64() - t0 < spin) {} }
    if (i < n) { float v = x[i]; y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678f)); }
    if (MODE == 4 && i == n - 1) y[i] += 1.0f;
}

// declared, compiled, never launched: the profiler must report it as a decoy
__global__ void unused_decoy_kernel(float* y) { y[0] = 0.0f; }

torch::Tensor fused(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    auto h = at::addmm(b, x, w.t());
    auto y = at::empty_like(h);
    int n = h.numel(), threads = 256, blocks = (n + threads - 1) / threads;
    cudaStream_t cur = at::cuda::getCurrentCUDAStream();
    if (MODE == 1) {
        static cudaStream_t side = nullptr;
        static cudaEvent_t ready;
        if (!side) { cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking); cudaEventCreateWithFlags(&ready, cudaEventDisableTiming); }
        cudaEventRecord(ready, cur);
        cudaStreamWaitEvent(side, ready, 0);
        gelu_fwd_kernel<<<blocks, threads, 0, side>>>(h.data_ptr<float>(), y.data_ptr<float>(), n, 2000000LL);
    } else if (MODE == 3) {
        gelu_fwd_kernel<<<blocks, threads, 0, cur>>>(h.data_ptr<float>(), y.data_ptr<float>(), n, 2000000LL);
    } else if (MODE == 2) {
        gelu_fwd_kernel<<<blocks, threads, 0, cur>>>(h.data_ptr<float>(), (float*)0x10, n, 0LL);
    } else {
        gelu_fwd_kernel<<<blocks, threads, 0, cur>>>(h.data_ptr<float>(), y.data_ptr<float>(), n, 0LL);
    }
    return y;
}
"""

ext = load_inline(name="km_gelu", cpp_sources=["torch::Tensor fused(torch::Tensor x, torch::Tensor w, torch::Tensor b);"],
                  cuda_sources=[CUDA], functions=["fused"])
PY_STREAM = "none"


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        if PY_STREAM == "none":
            return ext.fused(x, self.fc.weight, self.fc.bias)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # the extension launches on the current stream: this one
            y = ext.fused(x, self.fc.weight, self.fc.bias)
        if PY_STREAM == "joined":
            torch.cuda.current_stream().wait_stream(side)
        return y
