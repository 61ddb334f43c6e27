"""The ``run`` stage: mine Planner/Coder/Verifier trajectories over tasks into the store.

Many trajectories run at once on one asyncio loop; LLM calls await the backends while the
harness ``Evaluator`` builds and executes candidates in its own pools, so the two overlap.
A trajectory is written when it ends (its turns, then its trajectory row; each one atomic
Parquet part). Trajectory ids are deterministic (run id, task id, sample index), so re-running
with the same ``run_id`` skips the finished ones and mines only what is missing.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import platform
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from agents.coder import Coder
from agents.planner import Planner
from agents.state_machine import Budgets
from agents.trajectory import Agents, TrajectoryOutcome, run_trajectory
from agents.verifier import Verifier
from mining.store import Store


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)


def trajectory_id(run_id: str, task_id: str, sample: int) -> str:
    return f"{run_id}:{task_id}:s{sample}"


def sample_seed(base_seed: int, task_id: str, sample: int) -> int:
    h = hashlib.sha256(f"{base_seed}:{task_id}:{sample}".encode()).digest()
    return int.from_bytes(h[:4], "little") & 0x7FFFFFFF


@dataclass
class Job:
    task: Any
    sample: int
    trajectory_id: str
    seed: int


@dataclass
class Progress:
    total: int = 0
    skipped: int = 0
    done: int = 0
    in_flight: int = 0
    correct: int = 0
    best_speedup: float | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)  # finished trajectory rows

    def add(self, row: dict[str, Any]) -> None:
        self.done += 1
        self.rows.append(row)
        if row["best_correct"]:
            self.correct += 1
            s = row["best_speedup"]
            if s is not None and (self.best_speedup is None or s > self.best_speedup):
                self.best_speedup = s


@dataclass
class MineContext:
    run_id: str
    round: int
    store: Store
    make_agents: Callable[[Job], Agents]   # per-trajectory agents (seeded sampling)
    policy: str
    versions: dict[str, Any]               # gpu, torch, cuda, harness_version, reward_version
    concurrency: int = 8
    on_update: Callable[[Progress], None] | None = None


def plan_jobs(tasks, samples_per_task: int, run_id: str, base_seed: int,
              done: set[str]) -> tuple[list[Job], int]:
    jobs, skipped = [], 0
    for task in tasks:
        for s in range(samples_per_task):
            tid = trajectory_id(run_id, task.id, s)
            if tid in done:
                skipped += 1
                continue
            jobs.append(Job(task, s, tid, sample_seed(base_seed, task.id, s)))
    return jobs, skipped


def provenance(ctx: MineContext, task, result: dict | None) -> dict[str, Any]:
    v = dict(ctx.versions)
    if result:  # what the harness actually ran on wins over what this process sees
        for k in ("gpu", "torch", "cuda", "harness_version"):
            if result.get(k):
                v[k] = result[k]
    return {"run_id": ctx.run_id, "round": ctx.round, "policy": ctx.policy,
            "task_hash": task.hash, "gpu": v.get("gpu"), "torch": v.get("torch"),
            "cuda": v.get("cuda"), "harness_version": v.get("harness_version"),
            "reward_version": v.get("reward_version")}


def rows_for(ctx: MineContext, job: Job, out: TrajectoryOutcome) -> tuple[list[dict], dict]:
    last = next((t.result for t in reversed(out.turns) if t.result), None)
    prov = provenance(ctx, job.task, last)
    turns = [{**t.row(job.trajectory_id, job.task.id, i), **prov} for i, t in enumerate(out.turns)]
    plan = out.plan.to_dict() if out.plan else None
    traj = {
        "trajectory_id": job.trajectory_id, "task_id": job.task.id, "sample_index": job.sample,
        "seed": job.seed, "stop_reason": out.stop_reason, "n_turns": len(out.turns),
        "best_turn": out.best_turn, "best_speedup": out.best_speedup,
        "best_correct": out.best_correct, "best_code": out.best_code,
        "plan_json": json.dumps({"plan": plan, "decisions": out.decisions, "error": out.error}),
        "started_at": out.started_at, "ended_at": out.ended_at, "wall_s": out.wall_s, **prov,
    }
    return turns, traj


def write_trajectory(store: Store, turns: list[dict], traj: dict) -> None:
    """Turns first, then the trajectory row: a trajectory row means its turns are stored."""
    store.write("turns", turns)
    store.write("trajectories", [traj])


def write_run_row(ctx: MineContext, command: str, config: dict[str, Any]) -> None:
    if ctx.run_id in ctx.store.keys("runs"):
        return
    try:
        from importlib.metadata import version

        kv = version("kernelmine")
    except Exception:  # noqa: BLE001 - not installed as a package
        kv = "0.1.0"
    ctx.store.write("runs", [{"run_id": ctx.run_id, "round": ctx.round, "command": command,
                              "config_json": json.dumps(config, default=str),
                              "started_at": datetime.now(UTC), "host": platform.node(),
                              "kernelmine_version": kv}])


async def mine(ctx: MineContext, jobs: list[Job], progress: Progress) -> Progress:
    sem = asyncio.Semaphore(max(1, ctx.concurrency))

    async def one(job: Job) -> None:
        async with sem:
            progress.in_flight += 1
            _notify(ctx, progress)
            try:
                agents = ctx.make_agents(job)
                meta = {"task_id": job.task.id, "trajectory_id": job.trajectory_id,
                        "seed": job.seed}
                out = await run_trajectory(job.task, agents, meta)
                turns, traj = rows_for(ctx, job, out)
                await asyncio.to_thread(write_trajectory, ctx.store, turns, traj)
                progress.add(traj)
            finally:
                progress.in_flight -= 1
                _notify(ctx, progress)

    await asyncio.gather(*(one(j) for j in jobs))
    return progress


def _notify(ctx: MineContext, p: Progress) -> None:
    if ctx.on_update:
        ctx.on_update(p)


def make_agents_factory(backends: dict[str, Any], evaluate, agents_cfg: dict[str, Any],
                        device: str, role_sampling: dict[str, dict[str, Any]],
                        reference_profile=None) -> Callable[[Job], Agents]:
    budgets = Budgets.from_mapping(agents_cfg)

    def make(job: Job) -> Agents:
        def samp(role):
            return {**role_sampling.get(role, {}), "seed": job.seed}
        return Agents(
            planner=Planner(backends["planner"], samp("planner")),
            coder=Coder(backends["coder"], device, samp("coder")),
            verifier=Verifier(evaluate, budgets.target_speedup, backends["verifier"],
                              bool(agents_cfg.get("verifier_guidance")), samp("verifier"),
                              reference_profile),
            budgets=budgets)
    return make
