import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# Pre-norm GPT decoder blocks. Causal self-attention is written out: fused QKV projection,
# Q @ K^T scaled by 1/sqrt(head_dim), a lower-triangular mask, softmax, @ V, output
# projection; then a 4x GELU MLP. Both sub-layers are residual.
BATCH = 16
SEQ_LEN = 1024
EMBED_DIM = 1024
NUM_HEADS = 16
NUM_LAYERS = 2


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, heads, max_len):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        mask = torch.tril(torch.ones(max_len, max_len, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, max_len, max_len), persistent=False)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.heads))
        att = att.masked_fill(~self.mask[:, :, :t, :t], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, d)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, dim, heads, max_len):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads, max_len)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Model(nn.Module):
    def __init__(self, dim, heads, num_layers, max_len):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(dim, heads, max_len) for _ in range(num_layers)])
        self.ln_f = nn.LayerNorm(dim)

    def forward(self, x):
        return self.ln_f(self.blocks(x))


def get_inputs():
    return [torch.randn(BATCH, SEQ_LEN, EMBED_DIM)]


def get_init_inputs():
    return [EMBED_DIM, NUM_HEADS, NUM_LAYERS, SEQ_LEN]
