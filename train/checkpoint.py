"""Checkpoints: LoRA adapter + trainer state + metadata in one folder, registered in the store.

Layout::

    <store root>/checkpoints_data/<checkpoint id>/
        adapter/              peft save_pretrained (adapter_config.json, adapter_model.safetensors)
        trainer_state.pt      optimizer state, step, torch/python rng states
        metadata.json         round, step, reward statistics, data hashes, base model, config
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
from pathlib import Path

import torch


def data_hash(items) -> str:
    h = hashlib.sha256()
    for x in items:
        h.update(json.dumps(x, sort_keys=True, default=str).encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def save(folder: str | Path, model, optimizer, step: int, metadata: dict,
         state_dict: dict | None = None) -> Path:
    """``state_dict``: the adapter weights when the model's own are sharded (FSDP)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder / "adapter", **({"state_dict": state_dict} if state_dict else {}))
    state = {"optimizer": optimizer.state_dict(), "step": step,
             "torch_rng": torch.get_rng_state(), "python_rng": random.getstate(),
             "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}
    tmp = folder / ".trainer_state.pt.tmp"
    torch.save(state, tmp)
    tmp.replace(folder / "trainer_state.pt")
    meta = {**metadata, "step": step}
    (folder / "metadata.json").write_text(json.dumps(meta, indent=2, default=str))
    return folder


def load_state(folder: str | Path, optimizer) -> int:
    """Restore optimizer and rng states; returns the step to continue from."""
    path = Path(folder) / "trainer_state.pt"
    if not path.exists():
        raise ValueError(f"{folder} is not a trainer checkpoint (no trainer_state.pt)")
    state = torch.load(path, weights_only=False)
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["torch_rng"])
    random.setstate(state["python_rng"])
    if state.get("cuda_rng") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda_rng"])
    return int(state["step"])


def metadata(folder: str | Path) -> dict:
    return json.loads((Path(folder) / "metadata.json").read_text())


def register(store_root: str | Path, checkpoint_id: str, folder: Path, meta: dict) -> None:
    """One row in the store's ``checkpoints`` table."""
    from mining.store import Store

    row = {"checkpoint_id": checkpoint_id, "base_model": str(meta.get("base_model")),
           "adapter_path": str(Path(folder) / "adapter"), "step": int(meta.get("step", 0)),
           "reward_mean": meta.get("reward_mean"), "reward_std": meta.get("reward_std"),
           "data_hash": meta.get("data_hash"), "metadata_json": json.dumps(meta, default=str),
           "created_at": dt.datetime.now(dt.UTC), "run_id": meta.get("run_id"),
           "round": int(meta.get("round", 0)), "policy": meta.get("policy"),
           "torch": torch.__version__, "cuda": torch.version.cuda,
           "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"}
    Store(store_root).write("checkpoints", [row])


def resolve(store_root: str | Path, ref: str) -> Path:
    """A checkpoint folder from a path or a checkpoint id registered in the store."""
    p = Path(ref).expanduser()
    if p.is_dir():
        return p
    from mining.store import Store

    t = Store(store_root).read("checkpoints", columns=["checkpoint_id", "adapter_path"]).to_pylist()
    for r in t:
        if r["checkpoint_id"] == ref:
            return Path(r["adapter_path"]).parent
    raise ValueError(f"no checkpoint {ref!r}: not a folder and not in {store_root}/checkpoints")
