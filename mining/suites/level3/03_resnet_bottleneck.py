import torch
import torch.nn as nn

# A ResNet stage: a stack of bottleneck blocks (1x1 reduce, 3x3, 1x1 expand, each with
# batch-norm; ReLU between), with an identity shortcut added before the final ReLU.
# The first block projects the shortcut with a 1x1 conv because the width changes.
BATCH = 32
IN_CHANNELS = 256
MID_CHANNELS = 128
OUT_CHANNELS = 512
HEIGHT = 56
WIDTH = 56
NUM_BLOCKS = 4


class Bottleneck(nn.Module):
    def __init__(self, in_ch, mid_ch, out_ch):
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, mid_ch, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(mid_ch)
        self.conv2 = nn.Conv2d(mid_ch, mid_ch, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(mid_ch)
        self.conv3 = nn.Conv2d(mid_ch, out_ch, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_ch)
        self.relu = nn.ReLU(inplace=True)
        self.shortcut = None
        if in_ch != out_ch:
            self.shortcut = nn.Sequential(nn.Conv2d(in_ch, out_ch, 1, bias=False),
                                          nn.BatchNorm2d(out_ch))

    def forward(self, x):
        identity = x if self.shortcut is None else self.shortcut(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class Model(nn.Module):
    def __init__(self, in_channels, mid_channels, out_channels, num_blocks):
        super().__init__()
        blocks = [Bottleneck(in_channels, mid_channels, out_channels)]
        blocks += [Bottleneck(out_channels, mid_channels, out_channels)
                   for _ in range(num_blocks - 1)]
        self.blocks = nn.Sequential(*blocks)

    def forward(self, x):
        return self.blocks(x)


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, MID_CHANNELS, OUT_CHANNELS, NUM_BLOCKS]
