# Template of C++ candidates for the tiny task; tests substitute BODY (and a tag for a distinct hash).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <cstdlib>
#include <cmath>
// TAG
torch::Tensor fused(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    BODY
}
"""

ext = load_inline(name="tiny_fused", cpp_sources=[CPP], functions=["fused"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return ext.fused(x, self.fc.weight, self.fc.bias)
