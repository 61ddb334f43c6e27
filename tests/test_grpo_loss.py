"""GRPO advantages and loss: hand-computed values, and parity with TRL's real _compute_loss."""

from __future__ import annotations

import math
import types

import pytest
import torch

from train.advantages import group_advantages
from train.loss import LossConfig, grpo_loss, token_logps_and_entropy


def test_advantages_hand_computed():
    # group 1: [1, 3] mean 2, unbiased std sqrt(2); group 2: [5, 5] std 0
    a = group_advantages([1.0, 3.0, 5.0, 5.0], group_size=2, eps=0.0)
    s = math.sqrt(2.0)
    assert a[:2].tolist() == pytest.approx([-1 / s, 1 / s])
    assert torch.isnan(a[2:]).sum() == 0 and a[2:].tolist() == [0.0, 0.0]
    b = group_advantages([1.0, 3.0, 5.0, 5.0], group_size=2, scale_std=False)
    assert b.tolist() == [-1.0, 1.0, 0.0, 0.0]


def test_advantages_nan_reward_is_left_out():
    a = group_advantages([1.0, float("nan"), 3.0], group_size=3, scale_std=False)
    assert a.tolist() == [-1.0, 0.0, 1.0]


def test_advantages_bad_group_is_one_sentence():
    with pytest.raises(ValueError, match="do not split into groups of 4"):
        group_advantages([1.0, 2.0, 3.0], group_size=4)


def test_loss_hand_computed_clip_and_kl():
    # one sequence, two tokens; ratio e^0.5 ~ 1.6487 (clipped to 1.2 for A>0), e^-0.5 ~ 0.6065
    logps = torch.tensor([[-1.0, -2.0]])
    old = torch.tensor([[-1.5, -1.5]])
    ref = torch.tensor([[-1.0, -1.0]])
    mask = torch.ones(1, 2)
    cfg = LossConfig(epsilon_low=0.2, epsilon_high=0.2, beta=0.1)
    loss, m = grpo_loss(logps, old, torch.tensor([2.0]), mask, cfg, ref_logps=ref)
    # token 1: -min(1.6487*2, 1.2*2) = -2.4; token 2: -min(0.6065*2, 0.8*2) = -1.2131
    # k3: token 1 d=0 -> 0; token 2 d=1 -> e - 2 = 0.71828
    t1 = -2.4
    t2 = -math.exp(-0.5) * 2 + 0.1 * (math.e - 2)
    assert float(loss) == pytest.approx((t1 + t2) / 2, abs=1e-6)
    assert m["clip_high"] == pytest.approx(0.5) and m["clip_low"] == 0.0
    assert m["kl"] == pytest.approx((math.e - 2) / 2, abs=1e-6)


def test_loss_types_normalise_differently():
    logps = torch.zeros(2, 3)
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    adv = torch.tensor([1.0, 1.0])   # ratio 1: per-token loss -1
    g, _ = grpo_loss(logps, None, adv, mask, LossConfig("grpo"))
    b, _ = grpo_loss(logps, None, adv, mask, LossConfig("bnpo"))
    d, _ = grpo_loss(logps, None, adv, mask, LossConfig("dr_grpo", max_completion_length=5))
    assert float(g) == pytest.approx(-1.0)
    assert float(b) == pytest.approx(-1.0)
    assert float(d) == pytest.approx(-4 / 10)


def test_bad_loss_type_is_one_sentence():
    with pytest.raises(ValueError, match="loss_type must be one of"):
        LossConfig("ppo")


# -- parity with TRL ---------------------------------------------------------------------------

def _trl_trainer_stub(cfg: LossConfig, logps, entropies, accum: int):
    """A minimal object carrying exactly the attributes TRL's GRPOTrainer._compute_loss reads."""
    trl_grpo = pytest.importorskip("trl.trainer.grpo_trainer")

    class Acc:
        def reduce(self, x, reduction="sum"):
            return x

        def gather(self, x):
            return x

        gather_for_metrics = gather

    from collections import defaultdict

    stub = types.SimpleNamespace(
        top_entropy_quantile=1.0, off_policy_mask_threshold=None, importance_sampling_level="token",
        beta=cfg.beta, loss_type=cfg.loss_type, epsilon_low=cfg.epsilon_low,
        epsilon_high=cfg.epsilon_high, use_vllm=False, vllm_importance_sampling_correction=False,
        model=types.SimpleNamespace(training=True), current_gradient_accumulation_steps=accum,
        max_completion_length=cfg.max_completion_length, _entropy_bonus_enabled=False,
        aux_loss_enabled=False, _metrics={"train": defaultdict(list), "eval": defaultdict(list)},
        accelerator=Acc(), args=types.SimpleNamespace(use_bias_correction_kl=False, delta=None),
    )
    stub._get_per_token_logps_and_entropies = lambda *a, **k: (logps, entropies, None)
    return trl_grpo.GRPOTrainer._compute_loss, stub


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo"])
@pytest.mark.parametrize("beta", [0.0, 0.04])
def test_parity_with_trl_compute_loss(loss_type, beta):
    torch.manual_seed(0)
    B, P, T, V = 6, 4, 7, 50
    logits = torch.randn(B, T, V, dtype=torch.float64, requires_grad=True)
    ids = torch.randint(0, V, (B, T))
    logps, ent = token_logps_and_entropy(logits, ids)
    old = (logps + 0.3 * torch.randn(B, T, dtype=torch.float64)).detach()
    ref = (logps + 0.2 * torch.randn(B, T, dtype=torch.float64)).detach()
    mask = (torch.arange(T)[None, :] < torch.tensor([7, 5, 3, 7, 1, 6])[:, None]).long()
    adv = group_advantages(torch.rand(B), group_size=3).double()
    cfg = LossConfig(loss_type, epsilon_low=0.2, epsilon_high=0.28, beta=beta,
                     max_completion_length=T)
    accum = 2
    compute, stub = _trl_trainer_stub(cfg, logps, ent, accum)
    inputs = {"prompt_ids": torch.zeros(B, P, dtype=torch.long), "prompt_mask": torch.ones(B, P),
              "completion_ids": ids, "completion_mask": mask, "advantages": adv,
              "old_per_token_logps": old, "ref_per_token_logps": ref}
    trl_loss = compute(stub, None, inputs)
    ours, metrics = grpo_loss(logps, old, adv, mask, cfg, ref_logps=ref, entropy=ent)
    ours = ours / accum
    assert abs(trl_loss.item() - ours.item()) < 1e-6
    g_trl, = torch.autograd.grad(trl_loss, logits, retain_graph=True)
    g_ours, = torch.autograd.grad(ours, logits)
    assert torch.allclose(g_trl, g_ours, atol=1e-9)
    assert metrics["clip_frac"] == pytest.approx(stub._metrics["train"]["clip_ratio/region_mean"][0])
    if beta:
        assert metrics["kl"] == pytest.approx(stub._metrics["train"]["kl"][0])


def test_advantages_parity_with_trl_nanstd():
    trl_utils = pytest.importorskip("trl.trainer.utils")
    r = torch.rand(12)
    g = 4
    mean = r.view(-1, g).mean(1).repeat_interleave(g)
    std = trl_utils.nanstd(r.view(-1, g), dim=1).repeat_interleave(g)
    expected = (r - mean) / (std + 1e-4)
    assert torch.allclose(group_advantages(r, g), expected, atol=1e-7)
