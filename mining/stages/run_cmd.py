"""``python -m mining run +task=level3 [model=...]``: mine trajectories into the dataset store.

Resume an interrupted run with ``run_id=<id>`` (printed at start): finished trajectories are
skipped, the rest are mined.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from omegaconf import OmegaConf

from mining.errors import UserError
from mining.scale import open_executor, shard_note, shared_run_id


def _plain(node) -> dict[str, Any]:
    return OmegaConf.to_container(node, resolve=True) if node is not None else {}


def check_model(cfg) -> None:
    from agents.backends import NO_MODEL

    m = cfg.model
    need = {"openai": ("base_url", "model"), "hf": ("path",), "vllm": ("path",),
            "replay": ("path",)}.get(m.backend)
    if need is None:
        raise UserError(f"model.backend must be openai, hf, vllm or replay, not {m.backend!r}")
    if any(not m.get(k) for k in need):
        raise UserError(NO_MODEL)


def check_device(cfg, harness_cfg) -> str:
    device = harness_cfg.resolved_device()
    if device != "cuda" and cfg.model.backend != "replay" and cfg.harness.device == "auto":
        raise UserError("no CUDA GPU is visible, so generated CUDA candidates cannot be "
                        "evaluated here: run on a GPU machine, or pass harness.device=cpu to "
                        "evaluate C++ candidates on CPU")
    return device


def preflight_openai(model_cfg: dict[str, Any]) -> None:
    """One quick request so an unreachable endpoint is one sentence, not N failed trajectories."""
    import httpx

    url = str(model_cfg["base_url"]).rstrip("/") + "/models"
    try:
        httpx.get(url, timeout=float(model_cfg.get("connect_timeout_s", 10)))
    except httpx.HTTPError as e:
        raise UserError(f"the model endpoint {model_cfg['base_url']} is unreachable "
                        f"({type(e).__name__}); start the server or fix model.base_url") from e


def versions(cfg, device: str) -> dict[str, Any]:
    import torch

    from rewards.harness import HARNESS_VERSION

    gpu = torch.cuda.get_device_name(0) if device == "cuda" and torch.cuda.is_available() else None
    return {"gpu": gpu, "torch": torch.__version__, "cuda": torch.version.cuda,
            "harness_version": HARNESS_VERSION,
            "reward_version": str(cfg.rewards.get("version")) if "version" in cfg.rewards else None}


def main(cfg, args: list[str]) -> int:
    from agents.backends import BackendError, make_role_backends, role_configs
    from mining import mine as M
    from mining.scale import select_tasks
    from mining.stages.run_display import Display, summary_table
    from mining.store import Store
    from mining.tasks import load_tasks
    from rewards.harness.config import HarnessConfig

    if args:
        raise UserError(f"run takes no positional arguments (got {args}); use overrides")
    check_model(cfg)
    try:
        report = load_tasks(cfg.task)
    except (FileNotFoundError, ValueError) as e:
        raise UserError(str(e)) from e
    if not report.tasks:
        raise UserError("no task matched; check task.ids / task.names")
    tasks = select_tasks(report.tasks, cfg)
    harness_cfg = HarnessConfig.from_mapping(_plain(cfg.harness))
    device = check_device(cfg, harness_cfg)
    model_cfg = _plain(cfg.model)
    agents_cfg = _plain(cfg.agents)
    roles = role_configs(model_cfg, agents_cfg.get("roles"))
    for rc in {id(r): r for r in roles.values()}.values():
        if rc.get("backend") == "openai":
            preflight_openai(rc)
    try:
        backends = make_role_backends(model_cfg, agents_cfg.get("roles"))
    except BackendError as e:
        raise UserError(str(e)) from e

    run_id = shared_run_id(cfg) or M.new_run_id()
    store = Store(cfg.store.root)
    done = store.keys("trajectories")
    jobs, skipped = M.plan_jobs(tasks, int(agents_cfg.get("samples_per_task", 1)),
                                run_id, int(cfg.seed), done)
    print(f"run_id={run_id}  tasks={len(tasks)}{shard_note(cfg)}  trajectories={len(jobs) + skipped} "
          f"(already done: {skipped})  device={device}  model={backends['coder'].name}",
          file=sys.stderr)
    for err in report.errors:
        print(f"skipped {err}", file=sys.stderr)
    progress = M.Progress(total=len(jobs) + skipped, skipped=skipped)
    display = Display(progress)
    with open_executor(cfg, harness_cfg) as ev:
        async def evaluate(task, code):
            return await asyncio.wrap_future(ev.submit(task, code))

        ctx = M.MineContext(
            run_id=run_id, round=int(cfg.round), store=store, policy=_policy(model_cfg),
            versions=versions(cfg, device), concurrency=int(agents_cfg.get("concurrency", 8)),
            make_agents=M.make_agents_factory(backends, evaluate, agents_cfg, device, {},
                                              lambda task: asyncio.to_thread(ev.reference_profile, task)),
            on_update=display.update)
        if int(cfg.get("shard") or 0) == 0:  # one runs row per run, however many shards
            M.write_run_row(ctx, "run", OmegaConf.to_container(cfg, resolve=True))

        async def go():
            try:
                return await M.mine(ctx, jobs, progress)
            finally:
                for b in {id(b): b for b in backends.values()}.values():
                    await b.aclose()

        with display:
            asyncio.run(go())
    from rich.console import Console

    Console(stderr=False).print(summary_table(progress.rows, run_id))
    errors = [r for r in progress.rows if r["stop_reason"] == "backend_error"]
    if progress.rows and len(errors) == len(progress.rows):
        import json

        msg = json.loads(errors[0]["plan_json"]).get("error")
        raise UserError(f"every trajectory stopped on a model backend error: {msg}")
    return 0


def _policy(model_cfg: dict[str, Any]) -> str:
    name = model_cfg.get("name") or model_cfg.get("model") or model_cfg.get("path") or "?"
    ckpt = model_cfg.get("adapter") or model_cfg.get("checkpoint")
    return f"{model_cfg.get('backend')}:{name}" + (f"@{ckpt}" if ckpt else "")
