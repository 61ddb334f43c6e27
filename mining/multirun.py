"""``python -m mining <command> -m a=1,2 b=x,y``: a Hydra multirun of one command.

The CLI composes configs with ``hydra.compose`` (fast, no output folders); a sweep needs
``@hydra.main``, which brings Hydra's launchers: the basic one runs the jobs here one after
another, ``launcher=slurm`` (hydra-submitit-launcher) submits each job to SLURM. Every job gets
the composed config of its override combination and runs ``stages.<command>.main(cfg, [])``.
"""

from __future__ import annotations

import importlib
import sys

from omegaconf import OmegaConf

from mining.config import CONF_DIR, normalize_overrides
from mining.errors import UserError


def multirun(command: str, stage_module: str, overrides: list[str]) -> int:
    import hydra

    if any(o.split("=", 1)[0].lstrip("+") == "launcher" for o in overrides):
        try:
            import hydra_plugins.hydra_submitit_launcher  # noqa: F401
        except ImportError as e:
            raise UserError("launcher=slurm needs the submitit launcher: "
                            "pip install hydra-submitit-launcher") from e
    codes: list[int] = []  # filled when the jobs run in this process (the basic launcher)

    @hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
    def job(cfg) -> int:
        OmegaConf.set_struct(cfg, True)
        module = importlib.import_module(f"mining.stages.{stage_module}")
        try:
            rc = int(module.main(cfg, []) or 0)
        except UserError as e:
            print(f"error: {e}", file=sys.stderr)
            rc = 2
        codes.append(rc)
        return rc

    argv = sys.argv
    sys.argv = [f"mining-{command}", "--multirun", *normalize_overrides(overrides)]
    try:
        job()
    finally:
        sys.argv = argv
    return max(codes, default=0)
