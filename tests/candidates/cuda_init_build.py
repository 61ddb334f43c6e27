# A CUDA candidate written like real Level 3 solutions: load_inline inside __init__, through a
# helper, after moving weights with .cuda() and behind torch.cuda.is_available(), then
# self.to("cuda") after the build. The build worker (no GPU) must still build it, so that
# the GPU slot's workers load it from the cache (evidence.slot_builds == 0).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
__global__ void gelu_init_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678f)); }
}
torch::Tensor fused(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    auto h = at::addmm(b, x, w.t());
    auto y = at::empty_like(h);
    int n = h.numel(), threads = 256;
    gelu_init_kernel<<<(n + threads - 1) / threads, threads>>>(h.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""


def build_ext():
    return load_inline(name="km_gelu_init", cpp_sources=["torch::Tensor fused(torch::Tensor x, torch::Tensor w, torch::Tensor b);"],
                       cuda_sources=[CUDA], functions=["fused"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features).cuda()
        self.ext = build_ext() if torch.cuda.is_available() else None
        self.to("cuda")

    def forward(self, x):
        return self.ext.fused(x, self.fc.weight, self.fc.bias)
