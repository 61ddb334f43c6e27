"""LLM backends behind one async interface; ``make_backend(model_cfg)`` picks one.

Backends are imported only when selected: ``vllm`` and ``hf`` pull in heavy packages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agents.backends.base import Backend, BackendError, Completion, Message

BACKENDS = ("openai", "hf", "vllm", "replay")

NO_MODEL = ("no model is configured: pass model=openai model.base_url=http://HOST:PORT/v1 "
            "model.model=NAME, model=hf model.path=/path/to/model, or model=replay "
            "model.path=answers.jsonl")


def make_backend(cfg: Mapping[str, Any]) -> Backend:
    cfg = dict(cfg)
    kind = cfg.get("backend")
    if kind == "openai":
        from agents.backends.openai import OpenAIBackend

        if not cfg.get("base_url") or not cfg.get("model"):
            raise BackendError(NO_MODEL)
        return OpenAIBackend(cfg)
    if kind == "hf":
        from agents.backends.hf import HFBackend

        if not cfg.get("path"):
            raise BackendError(NO_MODEL)
        return HFBackend(cfg)
    if kind == "vllm":
        from agents.backends.vllm import VLLMBackend

        if not cfg.get("path"):
            raise BackendError(NO_MODEL)
        return VLLMBackend(cfg)
    if kind == "replay":
        from agents.backends.replay import ReplayBackend

        if not cfg.get("path"):
            raise BackendError(NO_MODEL)
        return ReplayBackend(cfg)
    raise BackendError(f"model.backend must be one of {', '.join(BACKENDS)}, not {kind!r}")


def role_configs(model_cfg: Mapping[str, Any], roles_cfg: Mapping[str, Any] | None,
                 roles=("planner", "coder", "verifier", "judge")) -> dict[str, dict[str, Any]]:
    """Per-role model configs: ``agents.roles.<role>`` keys override the ``model`` group.

    A role override that names a different backend replaces the base config instead of
    merging into it (an openai role does not inherit a replay path).
    """
    base = dict(model_cfg)
    out = {}
    for role in roles:
        over = dict((roles_cfg or {}).get(role) or {})
        if over.get("backend") and over["backend"] != base.get("backend"):
            out[role] = over
        else:
            merged = dict(base)
            for k, v in over.items():
                if isinstance(v, Mapping) and isinstance(merged.get(k), Mapping):
                    merged[k] = {**merged[k], **v}
                else:
                    merged[k] = v
            out[role] = merged
    return out


def make_role_backends(model_cfg, roles_cfg) -> dict[str, Backend]:
    """One backend per distinct role config (roles with equal configs share one instance)."""
    cfgs = role_configs(model_cfg, roles_cfg)
    made: dict[str, Backend] = {}
    out = {}
    for role, c in cfgs.items():
        key = repr(sorted(c.items(), key=lambda kv: kv[0]))
        if key not in made:
            made[key] = make_backend(c)
        out[role] = made[key]
    return out


__all__ = ["Backend", "BackendError", "Completion", "Message", "make_backend",
           "make_role_backends", "role_configs", "NO_MODEL"]
