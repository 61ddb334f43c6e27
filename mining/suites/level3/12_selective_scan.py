import torch
import torch.nn as nn
import torch.nn.functional as F

# Mamba-2-style selective state-space layers. Each layer: RMSNorm, an input projection to
# (gate z, signal x, input matrix B, output matrix C, step dt), a causal depthwise conv over
# (x, B, C) + SiLU, the selective scan h_t = exp(dt_t * A) h_{t-1} + dt_t x_t B_t^T,
# y_t = h_t C_t + D x_t, gating by SiLU(z) and an output projection, with a residual.
# The scan runs chunk by chunk: parallel (masked matmuls) inside a chunk, sequential
# across chunks through the carried state.
BATCH = 8
SEQ_LEN = 2048
D_MODEL = 1024
D_INNER = 2048
NUM_HEADS = 32
D_STATE = 128
CONV_KERNEL = 4
CHUNK = 256
NUM_LAYERS = 2


def chunked_scan(x, dt, A, B, C, chunk):
    """x: (b, L, H, P), dt: (b, L, H), A: (H,), B and C: (b, L, N) -> y: (b, L, H, P)."""
    b, length, heads, p = x.shape
    state = x.new_zeros(b, heads, p, B.shape[-1])
    outs = []
    for start in range(0, length, chunk):
        xc, dtc = x[:, start:start + chunk], dt[:, start:start + chunk]
        bc, cc = B[:, start:start + chunk], C[:, start:start + chunk]
        t = xc.shape[1]
        cum = torch.cumsum((dtc * A).transpose(1, 2), dim=-1)  # (b, H, t)
        seg = cum[..., :, None] - cum[..., None, :]  # decay from step s to step t
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        decay = torch.exp(seg.masked_fill(~causal, float("-inf")))
        xdt = xc * dtc[..., None]
        weights = (cc @ bc.transpose(1, 2))[:, None] * decay  # (b, H, t, s)
        y = torch.einsum("bhts,bshp->bthp", weights, xdt)
        y = y + torch.einsum("btn,bhpn->bthp", cc, state) * cum.exp().transpose(1, 2)[..., None]
        tail = torch.exp(cum[..., -1:] - cum)  # decay from step s to the chunk's end
        state = state * cum[..., -1].exp()[..., None, None] + torch.einsum(
            "bhs,bshp,bsn->bhpn", tail, xdt, bc)
        outs.append(y)
    return torch.cat(outs, dim=1)


class MambaLayer(nn.Module):
    def __init__(self, d_model, d_inner, heads, d_state, conv_kernel, chunk):
        super().__init__()
        self.d_inner, self.heads, self.d_state, self.chunk = d_inner, heads, d_state, chunk
        self.norm_weight = nn.Parameter(torch.ones(d_model))
        self.in_proj = nn.Linear(d_model, 2 * d_inner + 2 * d_state + heads, bias=False)
        conv_ch = d_inner + 2 * d_state
        self.conv = nn.Conv1d(conv_ch, conv_ch, conv_kernel, groups=conv_ch,
                              padding=conv_kernel - 1)
        self.A_log = nn.Parameter(torch.log(torch.linspace(1.0, 16.0, heads)))
        self.dt_bias = nn.Parameter(torch.linspace(-4.0, -2.0, heads))
        self.D = nn.Parameter(torch.ones(heads))
        self.out_proj = nn.Linear(d_inner, d_model, bias=False)

    def forward(self, u):
        b, length, _ = u.shape
        h = u * torch.rsqrt(u.pow(2).mean(-1, keepdim=True) + 1e-5) * self.norm_weight
        z, xbc, dt = self.in_proj(h).split(
            [self.d_inner, self.d_inner + 2 * self.d_state, self.heads], dim=-1)
        xbc = F.silu(self.conv(xbc.transpose(1, 2))[..., :length].transpose(1, 2))
        x, B, C = xbc.split([self.d_inner, self.d_state, self.d_state], dim=-1)
        dt = F.softplus(dt + self.dt_bias)
        x = x.reshape(b, length, self.heads, -1)
        y = chunked_scan(x, dt, -torch.exp(self.A_log), B, C, self.chunk)
        y = (y + x * self.D[:, None]).reshape(b, length, self.d_inner)
        return u + self.out_proj(y * F.silu(z))


class Model(nn.Module):
    def __init__(self, d_model, d_inner, heads, d_state, conv_kernel, chunk, num_layers):
        super().__init__()
        self.layers = nn.Sequential(*[
            MambaLayer(d_model, d_inner, heads, d_state, conv_kernel, chunk)
            for _ in range(num_layers)])

    def forward(self, x):
        return self.layers(x)


def get_inputs():
    return [torch.randn(BATCH, SEQ_LEN, D_MODEL)]


def get_init_inputs():
    return [D_MODEL, D_INNER, NUM_HEADS, D_STATE, CONV_KERNEL, CHUNK, NUM_LAYERS]
