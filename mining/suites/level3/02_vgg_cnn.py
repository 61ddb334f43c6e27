import torch
import torch.nn as nn

# A VGG-style image classifier: stages of 3x3 conv + batch-norm + ReLU, each closed by a 2x2
# max-pool, then global average pooling and a two-layer classifier head.
BATCH = 32
IN_CHANNELS = 3
IMAGE_SIZE = 224
WIDTHS = (64, 128, 256, 512)
CONVS_PER_STAGE = 2
NUM_CLASSES = 1000


class Model(nn.Module):
    def __init__(self, in_channels, widths, convs_per_stage, num_classes):
        super().__init__()
        layers = []
        ch = in_channels
        for width in widths:
            for _ in range(convs_per_stage):
                layers += [nn.Conv2d(ch, width, 3, padding=1, bias=False),
                           nn.BatchNorm2d(width), nn.ReLU(inplace=True)]
                ch = width
            layers.append(nn.MaxPool2d(2))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Sequential(nn.Linear(ch, 4 * ch), nn.ReLU(inplace=True),
                                  nn.Linear(4 * ch, num_classes))

    def forward(self, x):
        x = self.pool(self.features(x)).flatten(1)
        return self.head(x)


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, IMAGE_SIZE, IMAGE_SIZE)]


def get_init_inputs():
    return [IN_CHANNELS, WIDTHS, CONVS_PER_STAGE, NUM_CLASSES]
