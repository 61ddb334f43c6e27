import torch
import torch.nn as nn

# A U-Net for dense prediction: an encoder of double-conv (3x3 conv + BN + ReLU, twice)
# stages with max-pool downsampling, a bottleneck, and a decoder that upsamples with
# transposed convs, concatenates the matching encoder features (skip connections) and
# applies a double conv; a final 1x1 conv maps to per-pixel class logits.
BATCH = 8
IN_CHANNELS = 3
IMAGE_SIZE = 256
BASE_WIDTH = 32
DEPTH = 3
NUM_CLASSES = 8


def double_conv(in_ch, out_ch):
    return nn.Sequential(
        nn.Conv2d(in_ch, out_ch, 3, padding=1, bias=False), nn.BatchNorm2d(out_ch),
        nn.ReLU(inplace=True),
        nn.Conv2d(out_ch, out_ch, 3, padding=1, bias=False), nn.BatchNorm2d(out_ch),
        nn.ReLU(inplace=True),
    )


class Model(nn.Module):
    def __init__(self, in_channels, base_width, depth, num_classes):
        super().__init__()
        widths = [base_width * 2 ** i for i in range(depth + 1)]
        self.down = nn.ModuleList()
        ch = in_channels
        for w in widths[:-1]:
            self.down.append(double_conv(ch, w))
            ch = w
        self.pool = nn.MaxPool2d(2)
        self.bottleneck = double_conv(ch, widths[-1])
        self.up = nn.ModuleList()
        self.dec = nn.ModuleList()
        for w_hi, w_lo in zip(widths[:0:-1], widths[-2::-1]):
            self.up.append(nn.ConvTranspose2d(w_hi, w_lo, 2, stride=2))
            self.dec.append(double_conv(2 * w_lo, w_lo))
        self.head = nn.Conv2d(widths[0], num_classes, 1)

    def forward(self, x):
        skips = []
        for stage in self.down:
            x = stage(x)
            skips.append(x)
            x = self.pool(x)
        x = self.bottleneck(x)
        for up, dec, skip in zip(self.up, self.dec, reversed(skips)):
            x = dec(torch.cat([up(x), skip], dim=1))
        return self.head(x)


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, IMAGE_SIZE, IMAGE_SIZE)]


def get_init_inputs():
    return [IN_CHANNELS, BASE_WIDTH, DEPTH, NUM_CLASSES]
