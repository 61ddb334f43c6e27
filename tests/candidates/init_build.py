# load_inline inside ModelNew.__init__ (real code does this): the build must happen in the build
# pool, with the GPU slot's workers loading it from the cache.
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
torch::Tensor fused(torch::Tensor x, torch::Tensor w, torch::Tensor b) { return at::gelu(at::addmm(b, x, w.t())); }
"""


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.ext = load_inline(name="km_init_build", cpp_sources=[CPP], functions=["fused"])

    def forward(self, x):
        return self.ext.fused(x, self.fc.weight, self.fc.bias)
