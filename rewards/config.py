"""Reward config: conf/rewards/default.yaml merged with the caller's overrides.

>>> c = load({"r_max": 3})
>>> c["r_max"], c["cap"], c["dynamic"]["floor_slack"]
(3, 3.0, 0.9)
"""

from __future__ import annotations

import copy
import pathlib
from typing import Any

DEFAULT_PATH = pathlib.Path(__file__).resolve().parents[1] / "conf" / "rewards" / "default.yaml"
_cache: dict[str, Any] | None = None


def defaults() -> dict[str, Any]:
    global _cache
    if _cache is None:
        import yaml  # lazily: GPU nodes may lack it; then pass cfg explicitly

        _cache = yaml.safe_load(DEFAULT_PATH.read_text())
    return copy.deepcopy(_cache)


def load(overrides: Any = None) -> dict[str, Any]:
    base = defaults()
    if overrides is None:
        return base
    if hasattr(overrides, "items") and not isinstance(overrides, dict):
        overrides = dict(overrides.items())  # OmegaConf DictConfig
    unknown = sorted(set(overrides) - set(base))
    if unknown:
        raise ValueError(f"unknown reward config key(s) {unknown}; known: {sorted(base)}")
    for k, v in overrides.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            base[k].update(v)
        else:
            base[k] = v
    return base
