import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Missing semicolon and an undeclared name: g++ must fail.
CPP = r"""
#include <torch/types.h>
torch::Tensor broken(torch::Tensor x) { return undeclared_thing(x) }
"""
ext = load_inline(name="km_test_broken", cpp_sources=[CPP], functions=["broken"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()

    def forward(self, x):
        return ext.broken(x)
