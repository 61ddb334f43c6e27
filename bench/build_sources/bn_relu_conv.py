# Real-style Level 3 solution (written for bench/build_speed.py): AT_DISPATCH, the current
# stream from ATen/cuda, several kernels and launchers in the .cu.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>

template <typename scalar_t>
__global__ void bn_relu_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ mean,
                               const scalar_t* __restrict__ var, const scalar_t* __restrict__ gamma,
                               const scalar_t* __restrict__ beta, scalar_t* __restrict__ y,
                               int C, int HW, int total, float eps) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    int c = (i / HW) % C;
    scalar_t v = (x[i] - mean[c]) * rsqrtf((float)var[c] + eps) * gamma[c] + beta[c];
    y[i] = v > scalar_t(0) ? v : scalar_t(0);
}

__global__ void add_relu_kernel(const float* a, const float* b, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(a[i] + b[i], 0.f);
}

torch::Tensor bn_relu(torch::Tensor x, torch::Tensor mean, torch::Tensor var, torch::Tensor gamma,
                      torch::Tensor beta, double eps) {
    auto y = torch::empty_like(x);
    const int total = x.numel(), C = x.size(1), HW = x.size(2) * x.size(3);
    const int threads = 256, blocks = (total + threads - 1) / threads;
    auto stream = at::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "bn_relu", ([&] {
        bn_relu_kernel<scalar_t><<<blocks, threads, 0, stream>>>(
            x.data_ptr<scalar_t>(), mean.data_ptr<scalar_t>(), var.data_ptr<scalar_t>(),
            gamma.data_ptr<scalar_t>(), beta.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), C, HW, total, (float)eps);
    }));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}

torch::Tensor add_relu(torch::Tensor a, torch::Tensor b) {
    auto y = torch::empty_like(a);
    int n = a.numel();
    add_relu_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        a.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

cpp = """
torch::Tensor bn_relu(torch::Tensor x, torch::Tensor mean, torch::Tensor var, torch::Tensor gamma, torch::Tensor beta, double eps);
torch::Tensor add_relu(torch::Tensor a, torch::Tensor b);
"""

ops = load_inline(name="bn_relu_ops", cpp_sources=cpp, cuda_sources=source,
                  functions=["bn_relu", "add_relu"], extra_cuda_cflags=["-O3", "--use_fast_math"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, x):
        y = self.conv(x)
        y = ops.bn_relu(y, self.bn.running_mean, self.bn.running_var, self.bn.weight, self.bn.bias, self.bn.eps)
        return ops.add_relu(y, x)
