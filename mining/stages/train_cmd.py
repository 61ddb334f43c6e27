"""``python -m mining train [overrides]``: GRPO + LoRA over the stored skill prompts.

    python -m mining train model=hf model.path=/models/coder train.steps=50 +task=level3
"""

from __future__ import annotations

import contextlib
import sys

from omegaconf import OmegaConf

from mining.errors import UserError
from mining.store import Store


def _plain(node) -> dict:
    return OmegaConf.to_container(node, resolve=True) if node is not None else {}


def base_model(cfg) -> str:
    tcfg, mcfg = cfg.train, cfg.model
    path = tcfg.get("model") or (mcfg.get("path") if mcfg.get("backend") in ("hf", "vllm") else None)
    if not path:
        raise UserError("no base model to train: set train.model=/path/to/hf-model "
                        "(or model=hf model.path=...)")
    return str(path)


def decontaminated(cfg, tcfg, rows: list[dict], what: str) -> list[dict]:
    """``rows`` (with reference_hash / reference_structural_hash) less those whose reference is
    a held-out eval task, the same held-out set ``split`` uses; under ``warn`` all are kept."""
    from mining.stages.split_cmd import load_holdout
    from skills.decontam import decontaminate

    holdout = load_holdout(cfg)
    if not (holdout.exact or holdout.structural) or not rows:
        return rows
    mode = str(tcfg.decontam.get("on_match", "refuse"))
    kept, rep = decontaminate(rows, holdout, mode, bool(tcfg.decontam.get("structural", True)))
    if rep.matches:
        verb = "refused" if mode == "refuse" else "kept with a warning (train.decontam.on_match=warn)"
        print(f"train: decontamination: {rep.refused + rep.flagged} {what} {verb}; their references "
              f"match held-out tasks {dict(sorted(rep.matches.items()))}", file=sys.stderr)
    if rows and not kept:
        raise UserError(f"every {what[:-1]} to train on matches a held-out eval task "
                        f"({', '.join(sorted(rep.matches))}); train on other tasks or set "
                        "train.decontam.on_match=warn")
    return kept


def run_train(cfg, round_: int | None = None, adapter: str | None = None) -> dict:
    """Train once; returns {checkpoint_id, checkpoint_dir, adapter, steps, reward_first, reward_last}."""
    from train.config import TrainConfig
    from train.grpo import GRPOTrainer
    from train.skill_reward import SkillReward, load_reward_fn, prompts_from_samples

    over = {"adapter": adapter} if adapter else {}
    try:
        tcfg = TrainConfig.from_mapping(_plain(cfg.train), **over)
    except (ValueError, TypeError) as e:
        raise UserError(f"bad train config: {e}") from e
    store = Store(cfg.store.root)
    if tcfg.mode == "offline":
        return _run_offline(cfg, tcfg, store, round_)
    samples = [r for r in store.read("samples").to_pylist()
               if not tcfg.samples_run_id or r.get("run_id") == tcfg.samples_run_id]
    samples = decontaminated(cfg, tcfg, samples, "samples")
    prompts, metas = prompts_from_samples(samples, tcfg.skill, tcfg.samples_run_id, tcfg.max_prompts)
    if not prompts and tcfg.prompts_from_tasks:
        from mining.stages.split_cmd import load_templates
        from mining.tasks import load_tasks
        from train.skill_reward import prompts_from_tasks

        split_cfg = cfg.get("split")
        templates = load_templates(split_cfg.get("templates") if split_cfg is not None else None)
        tasks = [r["task"] for r in decontaminated(cfg, tcfg, [
            {"task": t, "reference_hash": t.hash, "reference_structural_hash": t.structural_hash}
            for t in load_tasks(cfg.task).tasks], "tasks")]
        prompts, metas = prompts_from_tasks(tasks, templates)
        if tcfg.max_prompts:
            prompts, metas = prompts[:tcfg.max_prompts], metas[:tcfg.max_prompts]
        print(f"train: no stored samples; {len(prompts)} Skill 1 prompts rendered from the tasks",
              file=sys.stderr)
    if not prompts:
        raise UserError(f"no skill samples to train on in {store.root}/samples; "
                        "run `python -m mining run` and `python -m mining split` first")
    model = base_model(cfg)
    rnd = int(cfg.get("round", 0) if round_ is None else round_)
    with contextlib.ExitStack() as stack:
        if tcfg.reward == "skill":
            from mining.tasks import load_tasks

            try:
                tasks = {t.id: t for t in load_tasks(cfg.task).tasks}
            except (FileNotFoundError, ValueError) as e:
                raise UserError(str(e)) from e
            try:
                reward_fn = stack.enter_context(SkillReward(tasks, _plain(cfg.harness), _plain(cfg.rewards),
                                                            _plain(cfg.get("executor"))))
            except (ValueError, ImportError) as e:
                raise UserError(str(e)) from e
        else:
            try:
                reward_fn = load_reward_fn(tcfg.reward)
            except ValueError as e:
                raise UserError(str(e)) from e
        try:
            trainer = GRPOTrainer(tcfg, model, reward_fn, prompts, metas, store.root,
                                  run_id=cfg.get("run_id") or None, round_=rnd)
        except ValueError as e:
            raise UserError(str(e)) from e
        res = trainer.train()
    h = res.history
    return {"checkpoint_id": res.checkpoint_id, "checkpoint_dir": str(res.checkpoint_dir),
            "adapter": str(res.checkpoint_dir / "adapter"), "steps": res.steps,
            "reward_first": h[0]["reward_mean"] if h else None,
            "reward_last": h[-1]["reward_mean"] if h else None, "log": str(res.log_path),
            "base_model": model,
            "time": {k: sum(x[k] for x in h) for k in ("gen_s", "eval_s", "reward_wait_s", "update_s", "step_s")}}


def _run_offline(cfg, tcfg, store, round_) -> dict:
    from train.grpo import GRPOTrainer
    from train.offline import pairs_from_store, train_offline

    samples = decontaminated(cfg, tcfg, store.read("samples").to_pylist(), "samples")
    if tcfg.samples_run_id:
        samples = [s for s in samples if s.get("run_id") == tcfg.samples_run_id]
    pairs = pairs_from_store(samples, store.read("scores").to_pylist())
    if len(pairs) < 2:
        raise UserError(f"train.mode=offline needs scored samples with responses in {store.root}; "
                        "run `python -m mining score` first")
    try:
        tr = GRPOTrainer(tcfg, base_model(cfg), lambda *a: [], [p for p, _, _ in pairs],
                         store_root=store.root, run_id=cfg.get("run_id") or None,
                         round_=int(cfg.get("round", 0) if round_ is None else round_))
        res = train_offline(tr, pairs)
    except ValueError as e:
        raise UserError(str(e)) from e
    h = res.history
    return {"checkpoint_id": res.checkpoint_id, "checkpoint_dir": str(res.checkpoint_dir),
            "adapter": str(res.checkpoint_dir / "adapter"), "steps": res.steps,
            "reward_first": h[0]["reward_mean"] if h else None,
            "reward_last": h[-1]["reward_mean"] if h else None, "log": str(res.log_path),
            "base_model": base_model(cfg),
            "time": {k: 0.0 for k in ("gen_s", "eval_s", "reward_wait_s", "update_s", "step_s")}}


def main(cfg, args: list[str]) -> int:
    import os

    out = run_train(cfg)
    if os.environ.get("RANK", "0") != "0":  # torchrun: rank 0 reports for all
        return 0
    t = out["time"]
    print(f"train: {out['steps']} steps, reward {out['reward_first']} -> {out['reward_last']}; "
          f"checkpoint {out['checkpoint_id']} at {out['checkpoint_dir']}")
    print(f"train: time generation {t['gen_s']:.1f}s, reward {t['eval_s']:.1f}s "
          f"(blocking {t['reward_wait_s']:.1f}s), update {t['update_s']:.1f}s; log {out['log']}",
          file=sys.stderr)
    return 0
