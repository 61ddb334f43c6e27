"""Sampling G completions per prompt from the current policy (HF generate; vLLM when installed)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch


@dataclass
class Rollout:
    prompts: list                   # chat prompts (one per completion, prompt-major)
    completions: list[str]
    prompt_ids: torch.Tensor        # (N, P) left-padded
    prompt_mask: torch.Tensor
    completion_ids: torch.Tensor    # (N, T) right-padded, eos included
    completion_mask: torch.Tensor
    meta: list[dict] = field(default_factory=list)
    gen_s: float = 0.0


def render(tok, prompt) -> str:
    if isinstance(prompt, str):
        return prompt
    return tok.apply_chat_template(list(prompt), tokenize=False, add_generation_prompt=True)


def completion_mask(ids: torch.Tensor, eos_id: int | None) -> torch.Tensor:
    """1 up to and including the first eos of each row, 0 after."""
    if eos_id is None:
        return torch.ones_like(ids)
    is_eos = ids == eos_id
    first = torch.where(is_eos.any(1), is_eos.int().argmax(1), torch.full((ids.size(0),), ids.size(1), device=ids.device))
    return (torch.arange(ids.size(1), device=ids.device)[None, :] <= first[:, None]).long()


@torch.no_grad()
def generate_hf(model, tok, prompts: list, metas: list[dict], group_size: int,
                max_new_tokens: int, temperature: float, top_p: float,
                max_prompt_length: int, autocast) -> Rollout:
    t0 = time.perf_counter()
    texts = [render(tok, p) for p in prompts]
    enc = tok(texts, return_tensors="pt", padding=True, truncation=True,
              max_length=max_prompt_length, add_special_tokens=False)
    dev = next(model.parameters()).device
    ids = enc["input_ids"].repeat_interleave(group_size, 0).to(dev)
    am = enc["attention_mask"].repeat_interleave(group_size, 0).to(dev)
    was_training = model.training
    model.eval()
    with autocast():
        out = model.generate(input_ids=ids, attention_mask=am, do_sample=True,
                             temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens,
                             pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    model.train(was_training)
    comp = out[:, ids.size(1):]
    cmask = completion_mask(comp, tok.eos_token_id)
    comp = comp.masked_fill(cmask == 0, tok.pad_token_id)
    completions = tok.batch_decode([c[m.bool()] for c, m in zip(comp, cmask, strict=True)], skip_special_tokens=True)
    rep_prompts = [p for p in prompts for _ in range(group_size)]
    rep_meta = [dict(m, completion_ids=c[mm.bool()].tolist(), group=i // group_size)
                for i, (m, c, mm) in enumerate(zip([m for m in metas for _ in range(group_size)],
                                                   comp, cmask, strict=True))]
    return Rollout(rep_prompts, completions, ids, am, comp, cmask, rep_meta,
                   gen_s=time.perf_counter() - t0)


def vllm_available() -> bool:
    try:
        import vllm  # noqa: F401
    except ImportError:
        return False
    return True
