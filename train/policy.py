"""Load the policy: a base HF causal LM with a trainable LoRA adapter (peft).

The reference policy for the KL term is the same model with the adapter disabled
(``with model.disable_adapter():``), so no second copy of the weights is held.
"""

from __future__ import annotations

from pathlib import Path

import torch


def pick_device(name: str = "auto") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("train.device=cuda but no CUDA GPU is visible")
    return torch.device(name)


def load_policy(base: str, lora, adapter: str | None, device: torch.device):
    """(peft model, tokenizer). ``adapter``: continue training an existing LoRA adapter folder."""
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not Path(base).expanduser().exists():
        raise ValueError(f"base model folder {base} does not exist")
    tok = AutoTokenizer.from_pretrained(base)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(base, dtype=dtype).to(device)
    if adapter:
        if not (Path(adapter) / "adapter_config.json").exists():
            raise ValueError(f"{adapter} is not a LoRA adapter folder (no adapter_config.json)")
        model = PeftModel.from_pretrained(model, adapter, is_trainable=True)
    else:
        cfg = LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                         target_modules=list(lora.target_modules), task_type="CAUSAL_LM")
        model = get_peft_model(model, cfg)
    # LoRA weights train in fp32 (bf16 autocast does the matmuls on GPU)
    for p in model.parameters():
        if p.requires_grad:
            p.data = p.data.float()
    return model, tok
