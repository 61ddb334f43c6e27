# A pure-Python candidate (no build) for sandbox checks; PROBE is substituted by the test.
import os
import socket

import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        PROBE
        return F.gelu(self.fc(x))
