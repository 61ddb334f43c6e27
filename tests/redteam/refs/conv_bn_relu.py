import torch
import torch.nn as nn

# Conv2d + BatchNorm2d + ReLU, a ResNet stem in miniature.
BATCH = 8
IN_CH = 3
OUT_CH = 16
SIZE = 32


class Model(nn.Module):
    def __init__(self, in_ch, out_ch):
        super().__init__()
        self.conv = nn.Conv2d(in_ch, out_ch, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(out_ch)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(BATCH, IN_CH, SIZE, SIZE)]


def get_init_inputs():
    return [IN_CH, OUT_CH]
