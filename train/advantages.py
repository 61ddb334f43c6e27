"""Group-relative advantages (GRPO).

For G completions of one prompt with rewards r_1..r_G::

    A_i = (r_i - mean(r)) / (std(r) + eps)        scale_std=True  (GRPO)
    A_i =  r_i - mean(r)                          scale_std=False (Dr. GRPO)

``std`` is the unbiased (Bessel-corrected) standard deviation, as in TRL. A reward that could
not be computed is NaN: it is left out of its group's mean and std, and its advantage is 0.

>>> group_advantages([1.0, 0.0, 1.0, 0.0], group_size=2, scale_std=False).tolist()
[0.5, -0.5, 0.5, -0.5]
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def _nanstd(x: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    mean = torch.nanmean(x, dim=dim, keepdim=True)
    var = torch.nanmean((x - mean) ** 2, dim=dim, keepdim=True)
    n = (~torch.isnan(x)).sum(dim=dim, keepdim=True).to(x.dtype)
    corr = torch.where(n > 1, n / (n - 1), torch.full_like(n, float("nan")))
    out = torch.sqrt(var * corr)
    return out.squeeze(dim) if dim is not None else out.reshape(())


def group_advantages(rewards: Sequence[float] | torch.Tensor, group_size: int,
                     scale_std: bool = True, scale: str = "group",
                     eps: float = 1e-4) -> torch.Tensor:
    """Advantages for rewards laid out prompt-major (the G completions of a prompt adjacent).

    ``scale`` picks the std used when ``scale_std``: ``"group"`` (per prompt) or ``"batch"``.
    """
    r = torch.as_tensor(rewards, dtype=torch.float32).flatten()
    if group_size < 1 or r.numel() % group_size:
        raise ValueError(f"{r.numel()} rewards do not split into groups of {group_size}")
    groups = r.view(-1, group_size)
    mean = torch.nanmean(groups, dim=1).repeat_interleave(group_size)
    adv = r - mean
    if scale_std:
        if scale == "group":
            std = _nanstd(groups, dim=1).repeat_interleave(group_size)
        elif scale == "batch":
            std = _nanstd(r).expand_as(r)
        else:
            raise ValueError(f"scale must be 'group' or 'batch', got {scale!r}")
        adv = adv / (std + eps)
    return torch.nan_to_num(adv, nan=0.0)


def group_stats(rewards: torch.Tensor, group_size: int) -> dict[str, float]:
    """Per-step reward statistics for the log (NaN rewards excluded)."""
    r = torch.as_tensor(rewards, dtype=torch.float32).flatten()
    ok = r[~torch.isnan(r)]
    groups = r.view(-1, group_size)
    gstd = _nanstd(groups, dim=1)
    return {
        "reward_mean": float(ok.mean()) if ok.numel() else float("nan"),
        "reward_std": float(ok.std()) if ok.numel() > 1 else 0.0,
        "reward_nan": int(torch.isnan(r).sum()),
        "frac_zero_std_groups": float(torch.isclose(torch.nan_to_num(gstd, nan=0.0),
                                                    torch.zeros_like(gstd)).float().mean()),
    }
