import torch
import torch.nn as nn

# A DenseNet dense block followed by a transition layer. Every layer (BN-ReLU-1x1 conv to
# 4*growth channels, BN-ReLU-3x3 conv to `growth` channels) sees the concatenation of the
# block input and all earlier layers' outputs; the transition halves channels and resolution.
BATCH = 64
IN_CHANNELS = 128
HEIGHT = 56
WIDTH = 56
GROWTH = 32
NUM_LAYERS = 6


class DenseLayer(nn.Module):
    def __init__(self, in_ch, growth):
        super().__init__()
        self.body = nn.Sequential(
            nn.BatchNorm2d(in_ch), nn.ReLU(inplace=True),
            nn.Conv2d(in_ch, 4 * growth, 1, bias=False),
            nn.BatchNorm2d(4 * growth), nn.ReLU(inplace=True),
            nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False),
        )

    def forward(self, features):
        return self.body(torch.cat(features, dim=1))


class Model(nn.Module):
    def __init__(self, in_channels, growth, num_layers):
        super().__init__()
        self.layers = nn.ModuleList(
            DenseLayer(in_channels + i * growth, growth) for i in range(num_layers))
        out_ch = in_channels + num_layers * growth
        self.transition = nn.Sequential(
            nn.BatchNorm2d(out_ch), nn.ReLU(inplace=True),
            nn.Conv2d(out_ch, out_ch // 2, 1, bias=False), nn.AvgPool2d(2))

    def forward(self, x):
        features = [x]
        for layer in self.layers:
            features.append(layer(features))
        return self.transition(torch.cat(features, dim=1))


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, GROWTH, NUM_LAYERS]
