# One C++ extension with several behaviours; every candidate built from this file shares one
# content-hashed build, so the harness tests pay for a single g++ run. BEHAVIOUR is substituted.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <cstdlib>
#include <limits>
torch::Tensor legit(torch::Tensor x, torch::Tensor w, torch::Tensor b) { return at::gelu(at::addmm(b, x, w.t())); }
torch::Tensor wrong(torch::Tensor x, torch::Tensor w, torch::Tensor b) { return at::relu(at::addmm(b, x, w.t())); }
torch::Tensor nanout(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    auto y = legit(x, w, b); y[0][0].fill_(std::numeric_limits<float>::quiet_NaN()); return y; }
torch::Tensor shape(torch::Tensor x, torch::Tensor w, torch::Tensor b) { return legit(x, w, b).narrow(1, 0, 5).contiguous(); }
torch::Tensor segv(torch::Tensor x, torch::Tensor w, torch::Tensor b) { *(volatile int*)nullptr = 1; return x; }
torch::Tensor abort_(torch::Tensor x, torch::Tensor w, torch::Tensor b) { std::abort(); return x; }
torch::Tensor alias(torch::Tensor x, torch::Tensor w, torch::Tensor b) { return x.narrow(1, 0, w.size(0)); }
torch::Tensor mutate(torch::Tensor x, torch::Tensor w, torch::Tensor b) { auto y = legit(x, w, b); x.zero_(); return y; }
"""

ext = load_inline(name="km_test_multi", cpp_sources=[CPP],
                  functions=["legit", "wrong", "nanout", "shape", "segv", "abort_", "alias", "mutate"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return ext.BEHAVIOUR(x, self.fc.weight, self.fc.bias)
