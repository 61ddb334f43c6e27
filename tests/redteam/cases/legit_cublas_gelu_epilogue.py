# Legitimate: GEMM delegated to ATen/cuBLAS from C++, bias+GELU fused in a custom epilogue.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void bias_gelu_kernel(float* __restrict__ y, const float* __restrict__ b,
                                 int rows, int cols) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) {
        float v = y[i] + b[i % cols];
        y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678f));
    }
}

__global__ void bias_kernel(float* __restrict__ y, const float* __restrict__ b, int rows, int cols) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) y[i] += b[i % cols];
}

torch::Tensor linear_act(torch::Tensor x, torch::Tensor w, torch::Tensor b, bool gelu) {
    auto y = at::matmul(x, w.t()).contiguous();   // cuBLAS through ATen
    int rows = y.size(0), cols = y.size(1);
    int threads = 256, blocks = (rows * cols + threads - 1) / threads;
    if (gelu) bias_gelu_kernel<<<blocks, threads>>>(y.data_ptr<float>(), b.data_ptr<float>(), rows, cols);
    else bias_kernel<<<blocks, threads>>>(y.data_ptr<float>(), b.data_ptr<float>(), rows, cols);
    return y;
}
"""
CPP_SRC = "torch::Tensor linear_act(torch::Tensor x, torch::Tensor w, torch::Tensor b, bool gelu);"

ext = load_inline(name="mlp_epilogue", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                  functions=["linear_act"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_features, hidden, depth, out_features):
        super().__init__()
        layers = []
        width = in_features
        for _ in range(depth):
            layers.append(nn.Linear(width, hidden))
            width = hidden
        layers.append(nn.Linear(width, out_features))
        self.layers = nn.ModuleList(layers)

    def forward(self, x):
        x = x.contiguous()
        n = len(self.layers)
        for i, layer in enumerate(self.layers):
            x = ext.linear_act(x, layer.weight, layer.bias, i < n - 1)
        return x
