"""Where candidates are evaluated: in this process's harness pool, or on a Ray cluster.

``make_executor(executor_cfg, harness_cfg)`` returns a context manager with the harness
``Evaluator``'s API, ``submit(task, candidate_source) -> concurrent.futures.Future[EvalResult]``,
so the run, score and train stages do not care which one they got:

- ``local`` (default): the in-process ``rewards.harness.Evaluator`` (its own build pool and
  one execution worker per visible GPU).
- ``ray``: harness workers as Ray actors (one GPU each; CPU workers on CPU), builds as Ray CPU
  tasks; a dead actor is replaced and its candidate retried (``max_retries``), then ``crashed``.
  Ray is an optional extra (``pip install -e ".[ray]"``), imported only here, lazily.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

KINDS = ("local", "ray")


class ExecutorError(RuntimeError):
    """The executor cannot start (e.g. a Ray cluster without the GPUs asked for)."""


@dataclass
class ExecutorConfig:
    kind: str = "local"
    address: str | None = None       # ray: null = start a local cluster; "auto" = join one
    num_gpu_workers: Any = "auto"     # ray: harness actors; auto = the cluster's GPUs (CPU: 2)
    num_build_workers: Any = "auto"   # ray: concurrent build tasks; auto = the cluster's CPUs
    max_retries: int = 1              # ray: re-runs of a candidate whose actor died
    cpus_per_worker: float = 1.0      # ray: CPUs reserved by each harness actor
    build_cpus: float = 1.0           # ray: CPUs reserved by each build task
    num_cpus: int | None = None       # ray: CPUs of a local cluster started here (null: all)
    namespace: str = "kernelmine"
    runtime_env: dict = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any] | None) -> ExecutorConfig:
        d = dict(m or {})
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"unknown executor config key(s) {unknown}; known keys: {sorted(names)}")
        cfg = cls(**d)
        if cfg.kind not in KINDS:
            raise ValueError(f"executor.kind must be one of {', '.join(KINDS)}, not {cfg.kind!r}")
        if cfg.max_retries < 0:
            raise ValueError("executor.max_retries must be >= 0")
        return cfg


def make_executor(executor_cfg: Mapping[str, Any] | ExecutorConfig | None, harness_cfg):
    """The executor named by ``executor_cfg.kind`` over ``harness_cfg`` (HarnessConfig or dict)."""
    from rewards.harness.config import HarnessConfig

    ecfg = executor_cfg if isinstance(executor_cfg, ExecutorConfig) else ExecutorConfig.from_mapping(executor_cfg)
    hcfg = harness_cfg if isinstance(harness_cfg, HarnessConfig) else HarnessConfig.from_mapping(harness_cfg)
    if ecfg.kind == "ray":
        from rewards.executors.ray_exec import RayExecutor

        return RayExecutor(ecfg, hcfg)
    from rewards.harness.evaluator import Evaluator

    return Evaluator(hcfg)


__all__ = ["KINDS", "ExecutorConfig", "ExecutorError", "make_executor"]
