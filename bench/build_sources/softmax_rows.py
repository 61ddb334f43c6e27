# Real-style Level 3 solution (written for bench/build_speed.py): warp-shuffle reductions, a
# bindings block written in the C++ source by hand (no functions=...).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <cfloat>

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
    return v;
}
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}

__global__ void softmax_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int cols) {
    const float* row = x + (size_t)blockIdx.x * cols;
    float* out = y + (size_t)blockIdx.x * cols;
    __shared__ float red[32];
    float m = -FLT_MAX;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, row[j]);
    m = warp_max(m);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    m = threadIdx.x < (blockDim.x >> 5) ? red[threadIdx.x] : -FLT_MAX;
    m = warp_max(m);
    __syncthreads();
    float s = 0.f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += __expf(row[j] - m);
    s = warp_sum(s);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = s;
    __syncthreads();
    s = threadIdx.x < (blockDim.x >> 5) ? red[threadIdx.x] : 0.f;
    s = warp_sum(s);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) out[j] = __expf(row[j] - m) / s;
}

torch::Tensor softmax_rows(torch::Tensor x) {
    TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32, "2D float32 expected");
    auto y = torch::empty_like(x);
    softmax_rows_kernel<<<x.size(0), 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.size(1));
    return y;
}

torch::Tensor scaled_softmax(torch::Tensor x, double scale) {
    return softmax_rows(x * scale);
}
"""

cpp_src = r"""
torch::Tensor softmax_rows(torch::Tensor x);
torch::Tensor scaled_softmax(torch::Tensor x, double scale);
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("softmax_rows", &softmax_rows, "row softmax");
    m.def("scaled_softmax", &scaled_softmax, "scaled row softmax");
}
"""

softmax_ext = load_inline(name="softmax_rows_ext", cpp_sources=cpp_src, cuda_sources=cuda_src,
                          verbose=False)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return softmax_ext.scaled_softmax(self.proj(x), 0.125)
