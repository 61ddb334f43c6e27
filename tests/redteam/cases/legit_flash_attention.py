# red-team case legit_flash_attention
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#define D 32
__global__ void attention_kernel(const float* __restrict__ q, const float* __restrict__ k,
        const float* __restrict__ v, float* __restrict__ o, int S, float scale) {
    __shared__ float qs[D];
    int b = blockIdx.y, row = blockIdx.x, t = threadIdx.x;
    const float* Q = q + (b * S + row) * D;
    if (t < D) qs[t] = Q[t];
    __syncthreads();
    if (t >= D) return;
    float m = -1e30f, l = 0.f, acc = 0.f;
    for (int j = 0; j < S; ++j) {
        const float* K = k + (b * S + j) * D;
        float s = 0.f;
#pragma unroll
        for (int d = 0; d < D; ++d) s += qs[d] * K[d];
        s *= scale;
        float mn = fmaxf(m, s), c = __expf(m - mn), p = __expf(s - mn);
        l = l * c + p;
        acc = acc * c + p * v[(b * S + j) * D + t];
        m = mn;
    }
    o[(b * S + row) * D + t] = acc / l;
}
torch::Tensor attention(torch::Tensor q, torch::Tensor k, torch::Tensor v, double scale) {
    auto o = torch::empty_like(q);
    int B = q.size(0), S = q.size(1);
    attention_kernel<<<dim3(S, B), D>>>(q.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(),
                                        o.data_ptr<float>(), S, (float)scale);
    return o;
}"""
ext = load_inline(name="legit_flash_attention", cpp_sources="torch::Tensor attention(torch::Tensor q, torch::Tensor k, torch::Tensor v, double scale);",
                  cuda_sources=CUDA_SRC, functions=["attention"])


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.scale = dim ** -0.5

    def forward(self, q, k, v):
        return ext.attention(q.contiguous(), k.contiguous(), v.contiguous(), self.scale)
