"""The GRPO objective: clipped importance ratio, optional k3 KL to the reference policy.

Per completion token t of completion i (ratio rho = exp(logp - logp_old))::

    l_it = -min(rho * A_i, clip(rho, 1 - eps_low, 1 + eps_high) * A_i) + beta * k3_it
    k3_it = exp(ref - logp) - (ref - logp) - 1          (Schulman's low-variance estimator)

Aggregation over the (B, T) mask M (``loss_type``, as in TRL):
- ``grpo``:    mean_i( sum_t l_it M_it / sum_t M_it )        (per-sequence length normalisation)
- ``bnpo``:    sum l M / sum M                               (token mean over the batch)
- ``dr_grpo``: sum l M / (B * max_completion_length)         (Dr. GRPO: a constant normaliser)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

LOSS_TYPES = ("grpo", "bnpo", "dr_grpo")


@dataclass(frozen=True)
class LossConfig:
    loss_type: str = "grpo"
    epsilon_low: float = 0.2
    epsilon_high: float = 0.2
    beta: float = 0.0
    max_completion_length: int = 256

    def __post_init__(self) -> None:
        if self.loss_type not in LOSS_TYPES:
            raise ValueError(f"loss_type must be one of {', '.join(LOSS_TYPES)}, got {self.loss_type!r}")


def token_logps_and_entropy(logits: torch.Tensor, ids: torch.Tensor,
                            temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """log p(ids) and the entropy of the distribution at each position; logits (B, T, V)."""
    logp_all = torch.log_softmax(logits.float() / temperature, dim=-1)
    logps = logp_all.gather(-1, ids.unsqueeze(-1)).squeeze(-1)
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logps, entropy


def completion_logps(model, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                     logits_to_keep: int, temperature: float = 1.0,
                     chunk: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log-probs and entropies of the last ``logits_to_keep`` tokens of each row."""
    chunk = chunk or input_ids.size(0)
    lps, ents = [], []
    for s in range(0, input_ids.size(0), chunk):
        ids, am = input_ids[s:s + chunk], attention_mask[s:s + chunk]
        logits = model(input_ids=ids, attention_mask=am, logits_to_keep=logits_to_keep + 1).logits
        logits = logits[:, :-1, :]                      # position t predicts token t + 1
        lp, ent = token_logps_and_entropy(logits, ids[:, -logits_to_keep:], temperature)
        lps.append(lp)
        ents.append(ent)
    return torch.cat(lps), torch.cat(ents)


def grpo_loss(logps: torch.Tensor, old_logps: torch.Tensor | None, advantages: torch.Tensor,
              mask: torch.Tensor, cfg: LossConfig, ref_logps: torch.Tensor | None = None,
              entropy: torch.Tensor | None = None) -> tuple[torch.Tensor, dict[str, float]]:
    """The loss of one micro-batch (before gradient-accumulation scaling) and its metrics."""
    mask = mask.to(logps.dtype)
    old = logps.detach() if old_logps is None else old_logps
    adv = advantages.unsqueeze(1) if advantages.dim() == 1 else advantages
    ratio = torch.exp(logps - old)
    clipped = torch.clamp(ratio, 1 - cfg.epsilon_low, 1 + cfg.epsilon_high)
    per_token = -torch.min(ratio * adv, clipped * adv)
    kl = None
    if cfg.beta != 0.0:
        if ref_logps is None:
            raise ValueError("beta != 0 needs the reference policy's log-probs")
        d = ref_logps - logps
        kl = torch.exp(d) - d - 1
        per_token = per_token + cfg.beta * kl
    if cfg.loss_type == "grpo":
        loss = ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    elif cfg.loss_type == "bnpo":
        loss = (per_token * mask).sum() / mask.sum().clamp(min=1.0)
    else:
        loss = (per_token * mask).sum() / (per_token.size(0) * cfg.max_completion_length)

    def mmean(x: torch.Tensor) -> float:
        return float((x.detach() * mask).sum() / mask.sum().clamp(min=1.0))

    low = (ratio < 1 - cfg.epsilon_low) & (adv < 0)
    high = (ratio > 1 + cfg.epsilon_high) & (adv > 0)
    metrics = {"clip_low": mmean(low.float()), "clip_high": mmean(high.float()),
               "clip_frac": mmean((low | high).float()),
               "kl": mmean(kl) if kl is not None else 0.0}
    if entropy is not None:
        metrics["entropy"] = mmean(entropy)
    return loss, metrics
