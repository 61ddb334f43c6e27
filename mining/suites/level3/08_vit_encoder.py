import torch
import torch.nn as nn
import torch.nn.functional as F

# A Vision Transformer encoder: a strided conv cuts the image into patch embeddings, a class
# token and learned position embeddings are added, then pre-norm encoder layers
# (multi-head self-attention written with matmuls + softmax, GELU MLP); the class token's
# final embedding goes through LayerNorm and a linear classifier.
BATCH = 32
IN_CHANNELS = 3
IMAGE_SIZE = 224
PATCH_SIZE = 16
EMBED_DIM = 768
NUM_HEADS = 12
MLP_RATIO = 4
DEPTH = 4
NUM_CLASSES = 1000


class EncoderLayer(nn.Module):
    def __init__(self, dim, heads, mlp_ratio):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, mlp_ratio * dim)
        self.fc2 = nn.Linear(mlp_ratio * dim, dim)

    def forward(self, x):
        b, n, d = x.shape
        hd = d // self.heads
        qkv = self.qkv(self.ln1(x)).view(b, n, 3, self.heads, hd).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = F.softmax((q @ k.transpose(-2, -1)) * hd ** -0.5, dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, n, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Model(nn.Module):
    def __init__(self, in_channels, image_size, patch_size, dim, heads, mlp_ratio, depth,
                 num_classes):
        super().__init__()
        num_patches = (image_size // patch_size) ** 2
        self.patch_embed = nn.Conv2d(in_channels, dim, patch_size, stride=patch_size)
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, num_patches + 1, dim) * 0.02)
        self.layers = nn.ModuleList(EncoderLayer(dim, heads, mlp_ratio) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, images):
        x = self.patch_embed(images).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x[:, 0]))


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, IMAGE_SIZE, IMAGE_SIZE)]


def get_init_inputs():
    return [IN_CHANNELS, IMAGE_SIZE, PATCH_SIZE, EMBED_DIM, NUM_HEADS, MLP_RATIO, DEPTH,
            NUM_CLASSES]
