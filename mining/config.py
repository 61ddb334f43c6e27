"""Compose the Hydra config from ``conf/`` and validate it against structured schemas."""

from __future__ import annotations

import os
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from mining.errors import UserError

CONF_DIR = Path(os.environ.get("KERNELMINE_CONF", Path(__file__).resolve().parent.parent / "conf"))


def _groups() -> set[str]:
    return {p.name for p in CONF_DIR.iterdir() if p.is_dir()}


def normalize_overrides(overrides: list[str]) -> list[str]:
    """Accept ``+task=level3`` and ``task=level3`` alike for groups that have a default.

    Every group has a default in ``config.yaml``, so Hydra's append syntax would fail with
    "an item is already at 'task'"; users coming from the docs of the method type ``+task=``.
    """
    groups = _groups()
    out = []
    for o in overrides:
        if o.startswith("+") and not o.startswith("++"):
            key = o[1:].split("=", 1)[0]
            if key in groups:
                o = o[1:]
        out.append(o)
    return out


def load_config(overrides: list[str] | None = None) -> DictConfig:
    if not CONF_DIR.is_dir():
        raise UserError(f"config directory {CONF_DIR} is missing; install kernelmine editable "
                        "(pip install -e .) or set KERNELMINE_CONF")
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose("config", overrides=normalize_overrides(overrides or []))
    except (HydraException, OmegaConfBaseException) as e:
        raise UserError(f"bad override: {_first_line(e)}") from e
    OmegaConf.set_struct(cfg, True)
    return cfg


def _first_line(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__
