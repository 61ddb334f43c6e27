# red-team case legit_cublas_handle
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cublas_v2.h>

__global__ void bias_act_kernel(float* __restrict__ y, const float* __restrict__ b, int M, int N, int act) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < M * N) {
        float v = y[i] + b[i % N];
        y[i] = act ? 0.5f * v * (1.f + erff(v * 0.70710678f)) : v;
    }
}

torch::Tensor linear_act(torch::Tensor x, torch::Tensor w, torch::Tensor b, bool act) {
    int M = x.size(0), K = x.size(1), N = w.size(0);
    auto y = torch::empty({M, N}, x.options());
    float alpha = 1.f, beta = 0.f;
    cublasHandle_t h = at::cuda::getCurrentCUDABlasHandle();
    cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, w.data_ptr<float>(), K,
                x.data_ptr<float>(), K, &beta, y.data_ptr<float>(), N);
    bias_act_kernel<<<(M * N + 255) / 256, 256>>>(y.data_ptr<float>(), b.data_ptr<float>(), M, N, act);
    return y;
}"""
CPP_SRC = "torch::Tensor linear_act(torch::Tensor x, torch::Tensor w, torch::Tensor b, bool act);"

ext = load_inline(name="legit_cublas_handle", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                  functions=["linear_act"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_features, hidden, depth, out_features):
        super().__init__()
        dims = [in_features] + [hidden] * depth + [out_features]
        self.layers = nn.ModuleList([nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:])])

    def forward(self, x):
        n = len(self.layers)
        for i, layer in enumerate(self.layers):
            x = ext.linear_act(x, layer.weight, layer.bias, i < n - 1)
        return x
