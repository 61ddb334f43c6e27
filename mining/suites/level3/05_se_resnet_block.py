import torch
import torch.nn as nn

# Squeeze-and-excitation residual blocks: two 3x3 conv + BN layers, then channel attention
# (global average pool -> FC reduce -> ReLU -> FC expand -> sigmoid -> per-channel scale),
# added to the identity shortcut and passed through ReLU.
BATCH = 32
CHANNELS = 128
HEIGHT = 56
WIDTH = 56
REDUCTION = 16
NUM_BLOCKS = 3


class SEBlock(nn.Module):
    def __init__(self, channels, reduction):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.fc1 = nn.Linear(channels, channels // reduction)
        self.fc2 = nn.Linear(channels // reduction, channels)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        squeeze = out.mean(dim=(2, 3))
        excite = torch.sigmoid(self.fc2(self.relu(self.fc1(squeeze))))
        out = out * excite[:, :, None, None]
        return self.relu(out + x)


class Model(nn.Module):
    def __init__(self, channels, reduction, num_blocks):
        super().__init__()
        self.blocks = nn.Sequential(*[SEBlock(channels, reduction) for _ in range(num_blocks)])

    def forward(self, x):
        return self.blocks(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CHANNELS, REDUCTION, NUM_BLOCKS]
