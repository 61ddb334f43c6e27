import torch
import torch.nn as nn

# A deep, wide MLP: a stack of GEMM + bias + GELU layers, then a projection.
BATCH = 4096
IN_FEATURES = 2048
HIDDEN = 4096
DEPTH = 6
OUT_FEATURES = 1000


class ModelNew(nn.Module):
    def __init__(self, in_features, hidden, depth, out_features):
        super().__init__()
        layers = []
        width = in_features
        for _ in range(depth):
            layers += [nn.Linear(width, hidden), nn.GELU()]
            width = hidden
        layers.append(nn.Linear(width, out_features))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)  # verbatim


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, HIDDEN, DEPTH, OUT_FEATURES]
