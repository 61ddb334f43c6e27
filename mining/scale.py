"""Scale-out helpers for the stages: deterministic shards and the configured executor.

Sharding: ``shard=i num_shards=n`` keeps the tasks (run) or samples (score) whose key hashes
to ``i`` modulo ``n``. The key is the task's content hash (the sample id for score), so every
machine computes the same split with no coordination, and the union of the shards is the
whole set with nothing twice. All shards of one run share its ``run_id``; parts have unique
names and trajectory ids are deterministic, so shards never overwrite each other and a re-run
of a shard resumes it.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from typing import Any

from omegaconf import OmegaConf

from mining.errors import UserError


def shard_of(key: str, num_shards: int) -> int:
    """The shard of ``key``: stable across machines, processes and Python versions.

    >>> [shard_of(k, 3) for k in ("a", "b", "c")] == [shard_of(k, 3) for k in ("a", "b", "c")]
    True
    """
    return int(hashlib.sha256(key.encode()).hexdigest()[:16], 16) % num_shards


def shard_spec(cfg) -> tuple[int, int]:
    shard, n = int(cfg.get("shard") or 0), int(cfg.get("num_shards") or 1)
    if n < 1 or not 0 <= shard < n:
        raise UserError(f"shard={shard} num_shards={n}: need num_shards >= 1 and 0 <= shard < num_shards")
    return shard, n


def select(items: list, key, cfg) -> list:
    shard, n = shard_spec(cfg)
    return items if n == 1 else [x for x in items if shard_of(key(x), n) == shard]


def select_tasks(tasks: list, cfg) -> list:
    """This shard's tasks (by task content hash); every task when ``num_shards=1``."""
    return select(tasks, lambda t: t.hash, cfg)


def shard_note(cfg) -> str:
    shard, n = shard_spec(cfg)
    return f" (shard {shard}/{n})" if n > 1 else ""


def shared_run_id(cfg) -> str | None:
    """``run_id``; a sharded run must name it so that its shards add up to one run."""
    _, n = shard_spec(cfg)
    rid = cfg.get("run_id")
    if n > 1 and not rid:
        raise UserError("a sharded run (num_shards > 1) needs run_id=<name> shared by all its shards")
    return str(rid) if rid else None


@contextlib.contextmanager
def open_executor(cfg, harness_cfg) -> Iterator[Any]:
    """The executor of ``cfg.executor`` (local by default), entered; start-up errors -> UserError."""
    from rewards.executors import ExecutorError, make_executor

    node = cfg.get("executor")
    ecfg = OmegaConf.to_container(node, resolve=True) if node is not None else None
    try:
        ex = make_executor(ecfg, harness_cfg)
        ex.__enter__()
    except (ValueError, ImportError, ExecutorError) as e:
        raise UserError(str(e)) from e
    try:
        yield ex
    except BaseException as e:  # an interrupt: the executor kills its workers instead of waiting
        ex.__exit__(type(e), e, e.__traceback__)
        raise
    ex.__exit__(None, None, None)
