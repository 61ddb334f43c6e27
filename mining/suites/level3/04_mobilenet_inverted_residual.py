import torch
import torch.nn as nn

# MobileNetV2-style inverted residual blocks: 1x1 expansion + BN + ReLU6, 3x3 depthwise conv
# + BN + ReLU6, 1x1 linear projection + BN, with a residual add when shapes allow.
# The first block downsamples with stride 2; the rest keep the resolution.
BATCH = 64
IN_CHANNELS = 32
OUT_CHANNELS = 64
HEIGHT = 112
WIDTH = 112
EXPANSION = 6
NUM_BLOCKS = 4


class InvertedResidual(nn.Module):
    def __init__(self, in_ch, out_ch, stride, expansion):
        super().__init__()
        hidden = in_ch * expansion
        self.use_residual = stride == 1 and in_ch == out_ch
        self.block = nn.Sequential(
            nn.Conv2d(in_ch, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(inplace=True),
            nn.Conv2d(hidden, hidden, 3, stride=stride, padding=1, groups=hidden, bias=False),
            nn.BatchNorm2d(hidden), nn.ReLU6(inplace=True),
            nn.Conv2d(hidden, out_ch, 1, bias=False), nn.BatchNorm2d(out_ch),
        )

    def forward(self, x):
        out = self.block(x)
        return x + out if self.use_residual else out


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, expansion, num_blocks):
        super().__init__()
        blocks = [InvertedResidual(in_channels, out_channels, 2, expansion)]
        blocks += [InvertedResidual(out_channels, out_channels, 1, expansion)
                   for _ in range(num_blocks - 1)]
        self.blocks = nn.Sequential(*blocks)

    def forward(self, x):
        return self.blocks(x)


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, EXPANSION, NUM_BLOCKS]
