"""FLOPs and minimum bytes of one aten op, estimated from the shapes the profiler recorded.

Input: the op name and the ``Input Dims`` / ``Input type`` / ``Concrete Inputs`` lists of a
torch.profiler ``cpu_op`` event (``record_shapes=True``). The bytes are what the op must move at
least (every input read once, the output written once); the FLOPs count a multiply-add as 2.
Ops not listed here count as elementwise over their largest input. Standard library only.
"""

from __future__ import annotations

import ast
import math

_ELEM = {"float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "int": 4,
         "bool": 1, "signed char": 1, "unsigned char": 1, "short int": 2, "c10::Float8_e4m3fn": 1}
# FLOPs per output element for ops that are not one multiply-add per element
_PER_ELEM = {"gelu": 8, "softmax": 5, "_softmax": 5, "log_softmax": 5, "layer_norm": 8,
             "native_layer_norm": 8, "batch_norm": 4, "native_batch_norm": 4,
             "_native_batch_norm_legit_no_training": 4, "cudnn_batch_norm": 4, "group_norm": 8,
             "native_group_norm": 8, "silu": 4, "sigmoid": 4, "tanh": 4, "exp": 1, "erf": 4}


def _numel(dims) -> int:
    return math.prod(dims) if isinstance(dims, list) and all(isinstance(d, int) for d in dims) else 0


def _tensors(dims: list, types: list) -> list[tuple[list[int], int]]:
    """(shape, element size) of every tensor argument (scalars and lists have no dims)."""
    out = []
    for i, d in enumerate(dims or []):
        t = types[i] if i < len(types or []) else ""
        if isinstance(d, list) and d and all(isinstance(x, int) for x in d) and t in _ELEM:
            out.append((d, _ELEM[t]))
    return out


def _concrete(conc: list, i: int, default):
    try:
        v = ast.literal_eval(conc[i]) if conc and i < len(conc) and conc[i] not in ("", None) else default
    except (ValueError, SyntaxError):
        return default
    return v


# argument positions per overload: stride, padding, dilation, groups, output_padding, and whether
# it is transposed (a bool, or the position of its `transposed` argument); the aten schemas
_CONV_ARGS = {
    "aten::cudnn_convolution": (3, 2, 4, 5, None, False),
    "aten::conv1d": (3, 4, 5, 6, None, False), "aten::conv2d": (3, 4, 5, 6, None, False),
    "aten::conv3d": (3, 4, 5, 6, None, False),
    "aten::conv_transpose1d": (3, 4, 7, 6, 5, True), "aten::conv_transpose2d": (3, 4, 7, 6, 5, True),
    "aten::conv_transpose3d": (3, 4, 7, 6, 5, True),
    "aten::cudnn_convolution_transpose": (4, 2, 5, 6, 3, True),
    "aten::miopen_convolution_transpose": (5, 3, 6, 7, 4, True),
}
_CONV_DEFAULT = (3, 4, 5, 8, 7, 6)  # aten::convolution, aten::_convolution, convolution_overrideable


def _ints(v, n: int) -> list[int] | None:
    v = [v] * n if isinstance(v, int) else v
    return list(v) if isinstance(v, (list, tuple)) and len(v) == n and all(isinstance(x, int) for x in v) else None


def _conv(name: str, dims: list, types: list, conc: list) -> tuple[float, float] | None:
    """FLOPs and bytes of a (transposed) convolution; None where the arguments do not add up
    (an estimate never fails the profile it is part of)."""
    ts = _tensors(dims, types)
    if len(ts) < 2 or len(ts[0][0]) < 3:
        return None
    (x, es), (w, _) = ts[0], ts[1]
    p_st, p_pd, p_dl, p_g, p_op, tr = _CONV_ARGS.get(name, _CONV_DEFAULT)
    sd = len(x) - 2
    if len(w) != len(x):
        return None
    st, pd, dl = (_ints(_concrete(conc, p, [d] * sd), sd) for p, d in ((p_st, 1), (p_pd, 0), (p_dl, 1)))
    groups = _concrete(conc, p_g, 1)
    transposed = tr if isinstance(tr, bool) else _concrete(conc, tr, False) is True
    opad = _ints(_concrete(conc, p_op, [0] * sd), sd) if p_op is not None else [0] * sd
    if None in (st, pd, dl, opad) or not isinstance(groups, int) or groups < 1 or min(st) < 1:
        return None
    k = w[2:]
    if transposed:  # weight [C_in, C_out/groups, k...]: every input element meets C_out/groups x k weights
        spatial = [(x[2 + i] - 1) * st[i] - 2 * pd[i] + dl[i] * (k[i] - 1) + opad[i] + 1 for i in range(sd)]
        out = [x[0], w[1] * groups, *spatial]
        flops = 2.0 * _numel(x) * w[1] * _numel(k)
    else:  # weight [C_out, C_in/groups, k...]
        spatial = [(x[2 + i] + 2 * pd[i] - dl[i] * (k[i] - 1) - 1) // st[i] + 1 for i in range(sd)]
        out = [x[0], w[0], *spatial]
        flops = 2.0 * _numel(out) * (x[1] // groups) * _numel(k)
    if min(spatial) < 1:
        return None
    return flops, float((_numel(x) + _numel(w) + _numel(out)) * es)


def estimate(name: str, dims: list, types: list, concrete: list | None = None) -> dict | None:
    """
    >>> estimate("aten::addmm", [[256], [64, 128], [128, 256], [], []], ["float"] * 3 + ["Scalar"] * 2)
    {'flops': 4194304.0, 'bytes': 230400.0}
    >>> estimate("aten::relu", [[1024]], ["float"])
    {'flops': 1024.0, 'bytes': 8192.0}
    """
    ts = _tensors(dims, types)
    if not ts:
        return None
    op = name.split("::")[-1]
    if op in ("mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "addbmm"):
        mats = [t for t in ts if len(t[0]) >= 2]
        if len(mats) < 2:
            return None
        (a, es), (b, _) = mats[-2], mats[-1]
        if op == "linear":  # x[..., K] @ w[N, K]^T
            m, k, n = _numel(a[:-1]), a[-1], b[0]
            batch = 1
        else:
            batch, m, k, n = _numel(a[:-2]) or 1, a[-2], a[-1], b[-1]
        out = batch * m * n
        flops = 2.0 * batch * m * k * n
        return {"flops": flops, "bytes": float(sum(_numel(t) * e for t, e in ts) + out * es)}
    if "convolution" in op or op.startswith(("conv1d", "conv2d", "conv3d", "conv_transpose")):
        r = _conv(name, dims, types, concrete or [])
        return None if r is None else {"flops": r[0], "bytes": r[1]}
    if "scaled_dot_product" in op or "flash_attention" in op or "efficient_attention" in op:
        q, es = ts[0]
        k = ts[1][0] if len(ts) > 1 else q
        b_h, lq, e, lk = _numel(q[:-2]), q[-2], q[-1], k[-2]
        return {"flops": 4.0 * b_h * lq * lk * e, "bytes": float((sum(_numel(t) for t, _ in ts[:3]) + _numel(q)) * es)}
    big, es = max(ts, key=lambda t: _numel(t[0]))
    n = _numel(big)
    return {"flops": float(n * _PER_ELEM.get(op.rstrip("_"), 1)),
            "bytes": float(sum(_numel(t) * e for t, e in ts) + n * es)}


def roofline(flops: float, nbytes: float, bandwidth_Bps: float, peak_flops: float) -> dict:
    """Time at the roofline and which roof binds.

    >>> r = roofline(2e9, 1e6, 4e12, 6e13); r["bound"], round(r["ceiling_us"], 2)
    ('compute', 33.33)
    """
    t_mem, t_cmp = nbytes / bandwidth_Bps, flops / peak_flops
    return {"flops": flops, "bytes": nbytes, "intensity": flops / nbytes if nbytes else None,
            "ridge": peak_flops / bandwidth_Bps, "bound": "compute" if t_cmp > t_mem else "memory",
            "ceiling_us": max(t_mem, t_cmp) * 1e6}
