"""``python -m mining split``: turns -> deduplicated, decontaminated Skill 1 / Skill 2 samples."""

from __future__ import annotations

import sys
from pathlib import Path

from mining.errors import UserError
from mining.store import Store
from skills.decontam import MODES, Holdout, decontaminate
from skills.fingerprint import content_hash, structural_hash
from skills.split import Reference, SplitOptions, split_turns

TEMPLATES_DIR = Path(__file__).resolve().parents[2] / "skills" / "templates"


def load_templates(folder: str | None) -> dict[str, str]:
    d = Path(folder).expanduser() if folder else TEMPLATES_DIR
    out = {}
    for name in ("system", "skill1", "skill2"):
        p = d / f"{name}.md"
        if not p.is_file():
            raise UserError(f"prompt template {p} is missing (split.templates needs system.md, "
                            "skill1.md and skill2.md)")
        out[name] = p.read_text()
    return out


def load_references(task_cfg) -> dict[str, Reference]:
    from mining.tasks import load_tasks

    try:
        report = load_tasks(task_cfg)
    except (FileNotFoundError, ValueError) as e:
        raise UserError(str(e)) from e
    return {t.id: Reference(t.id, t.source, t.hash, t.structural_hash) for t in report.tasks}


def load_holdout(cfg) -> Holdout:
    """Held-out eval tasks: ``task.holdout`` ids and every file in ``split.decontam.holdout_dir``.

    ``train`` uses this too, so that both refuse the same references.
    """
    triples = []
    ids = [str(i) for i in (cfg.task.get("holdout") or [])]
    if ids:
        from mining.tasks import load_tasks

        tasks = {t.id: t for t in load_tasks(cfg.task).tasks}
        missing = [i for i in ids if i not in tasks]
        if missing:
            raise UserError(f"task.holdout names unknown task id(s) {missing}; "
                            f"known: {', '.join(sorted(tasks))}")
        triples += [(i, tasks[i].hash, tasks[i].structural_hash) for i in ids]
    hdir = cfg.split.decontam.get("holdout_dir")
    if hdir:
        d = Path(hdir).expanduser()
        if not d.is_dir():
            raise UserError(f"split.decontam.holdout_dir {d} is not a directory")
        for p in sorted(d.glob("*.py")):
            src = p.read_text()
            try:
                triples.append((p.stem, content_hash(src), structural_hash(src)))
            except SyntaxError as e:
                raise UserError(f"held-out reference {p} is not valid Python ({e.msg})") from e
    return Holdout.from_hashes(triples)


def options(scfg) -> SplitOptions:
    return SplitOptions(
        skills=tuple(int(s) for s in scfg.skills), drop_malformed=bool(scfg.drop_malformed),
        keep_failures=bool(scfg.keep_failures), require_modelnew=bool(scfg.require_modelnew),
        min_code_chars=int(scfg.min_code_chars),
        statuses=tuple(scfg.statuses) if scfg.statuses is not None else None,
        hardware=scfg.hardware)


def main(cfg, args: list[str]) -> int:
    scfg = cfg.split
    mode = str(scfg.decontam.on_match)
    if mode not in MODES:
        raise UserError(f"split.decontam.on_match must be one of {', '.join(MODES)}, not {mode!r}")
    store = Store(cfg.store.root)
    turns = store.read("turns").to_pylist()
    if scfg.run_ids:
        want = {str(r) for r in scfg.run_ids}
        turns = [t for t in turns if t["run_id"] in want]
    if not turns:
        raise UserError(f"no turns in {store.root / 'turns'}; run `python -m mining run` first "
                        "(or point store.root at a dataset)")
    rows, rep = split_turns(turns, load_references(cfg.task), load_templates(scfg.templates),
                            options(scfg))
    rows, drep = decontaminate(rows, load_holdout(cfg), mode, bool(scfg.decontam.structural))
    existing = store.keys("samples")
    new = [r for r in rows if r["sample_id"] not in existing]
    by_run: dict[str, list[dict]] = {}
    for r in new:
        by_run.setdefault(r["run_id"], []).append(r)
    for run_id, part in by_run.items():
        store.write("samples", part, partition=run_id)
    n1 = sum(r["skill"] == 1 for r in new)
    print(f"split: {rep.considered} coder turns -> {len(new)} new samples "
          f"(skill 1: {n1}, skill 2: {len(new) - n1}, negatives: {sum(r['negative'] for r in new)}); "
          f"{rep.duplicates} duplicates, {len(rows) - len(new)} already stored")
    for why, n in sorted(rep.dropped.items()):
        print(f"  dropped {n}: {why}")
    if drep.matches:
        verb = "refused" if mode == "refuse" else "kept with a warning (contamination column)"
        print(f"decontamination: {drep.refused + drep.flagged} samples {verb}; their references "
              f"match held-out tasks {dict(sorted(drep.matches.items()))}", file=sys.stderr)
    return 0
