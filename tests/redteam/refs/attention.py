import torch
import torch.nn as nn

# Single-head scaled dot-product attention over given q, k, v.
BATCH = 4
SEQ = 64
DIM = 32


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.scale = dim ** -0.5

    def forward(self, q, k, v):
        att = torch.softmax(q @ k.transpose(-2, -1) * self.scale, dim=-1)
        return att @ v


def get_inputs():
    return [torch.randn(BATCH, SEQ, DIM), torch.randn(BATCH, SEQ, DIM), torch.randn(BATCH, SEQ, DIM)]


def get_init_inputs():
    return [DIM]
