# Real-style Level 3 solution (written for bench/build_speed.py): torch/extension.h in the .cu,
# torch::Tensor launchers, bindings through functions=[...].
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

#define TILE 16

__global__ void linear_relu_kernel(const float* x, const float* w, const float* b, float* out,
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
        acc += b[col];
        out[row * N + col] = relu ? fmaxf(acc, 0.f) : acc;
    }
}

torch::Tensor linear_relu_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b, bool relu) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda() && b.is_cuda(), "inputs must be CUDA tensors");
    x = x.contiguous(); w = w.contiguous();
    const int M = x.size(0), K = x.size(1), N = w.size(0);
    auto out = torch::empty({M, N}, x.options());
    dim3 block(TILE, TILE), grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    linear_relu_kernel<<<grid, block>>>(x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(),
                                        out.data_ptr<float>(), M, N, K, relu);
    return out;
}
"""

cpp_source = "torch::Tensor linear_relu_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b, bool relu);"

fused = load_inline(name="fused_mlp", cpp_sources=cpp_source, cuda_sources=cuda_source,
                    functions=["linear_relu_cuda"], verbose=False, extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        super().__init__()
        sizes = [input_size, *layer_sizes, output_size]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = fused.linear_relu_cuda(x, layer.weight, layer.bias, i < len(self.layers) - 1)
        return x
