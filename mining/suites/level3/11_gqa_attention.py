import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# Grouped-query causal attention with rotary position embeddings (the attention layer of
# Llama-style models): NUM_HEADS query heads share NUM_KV_HEADS key/value heads. The
# attention is written out (no fused SDPA) so every step is visible to an optimizer.
BATCH = 4
SEQ_LEN = 2048
EMBED_DIM = 2048
NUM_HEADS = 16
NUM_KV_HEADS = 4
ROPE_BASE = 10000.0


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


class Model(nn.Module):
    def __init__(self, dim, heads, kv_heads, max_len, rope_base):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.kv_proj = nn.Linear(dim, 2 * kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(dim, dim, bias=False)
        inv_freq = 1.0 / rope_base ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim)
        angles = torch.outer(torch.arange(max_len).float(), inv_freq)
        angles = torch.cat([angles, angles], dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)
        mask = torch.triu(torch.ones(max_len, max_len, dtype=torch.bool), diagonal=1)
        self.register_buffer("future", mask, persistent=False)

    def forward(self, x):
        b, t, d = x.shape
        hd = self.head_dim
        q = self.q_proj(x).view(b, t, self.heads, hd).transpose(1, 2)
        k, v = self.kv_proj(x).view(b, t, 2, self.kv_heads, hd).permute(2, 0, 3, 1, 4)
        cos, sin = self.cos[:t], self.sin[:t]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        group = self.heads // self.kv_heads
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        scores = scores.masked_fill(self.future[:t, :t], float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.o_proj(out.transpose(1, 2).reshape(b, t, d))


def get_inputs():
    return [torch.randn(BATCH, SEQ_LEN, EMBED_DIM)]


def get_init_inputs():
    return [EMBED_DIM, NUM_HEADS, NUM_KV_HEADS, SEQ_LEN, ROPE_BASE]
