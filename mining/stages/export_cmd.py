"""``python -m mining export trl|verl|hf``: samples (+ their latest scores) for RL trainers.

- ``trl``: Parquet with ``prompt`` (chat messages), ``completion`` and reward metadata columns.
- ``verl``: Parquet with data_source, prompt, ability, reward_model, extra_info.
- ``hf``: a Hugging Face ``datasets`` dataset (``save_to_disk``) of the TRL layout.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from mining.errors import UserError
from mining.store import Store, atomic_write_parquet
from skills.export import trl_row, verl_row

FORMATS = ("trl", "verl", "hf")
SCORE_COLS = ("reward", "correct", "speedup", "speedup_vs_compile", "major_hack",
              "scorer_version")


def joined(store: Store, scorer_version: str | None, min_reward: float | None) -> list[dict]:
    """Samples with the scores of one scorer version (default: each sample's latest score)."""
    scores: dict[str, dict] = {}
    for r in store.read("scores").to_pylist():
        if scorer_version and r["scorer_version"] != scorer_version:
            continue
        cur = scores.get(r["sample_id"])
        if cur is None or (r["scored_at"] or 0) > (cur["scored_at"] or 0):
            scores[r["sample_id"]] = r
    rows = []
    for s in store.read("samples").to_pylist():
        sc = scores.get(s["sample_id"], {})
        s.update({k: sc.get(k) for k in SCORE_COLS})
        if min_reward is not None and (s["reward"] is None or s["reward"] < min_reward):
            continue
        rows.append(s)
    rows.sort(key=lambda r: r["sample_id"])
    return rows


def main(cfg, args: list[str]) -> int:
    ecfg = cfg.store.export
    fmt = args[0] if args else str(ecfg.format)
    if fmt not in FORMATS:
        raise UserError(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")
    store = Store(cfg.store.root)
    rows = joined(store, ecfg.scorer_version, ecfg.min_reward)
    if not rows:
        raise UserError(f"no samples to export in {store.root}; run `python -m mining split` first")
    out = Path(ecfg.out).expanduser() if ecfg.out else store.root / "export" / fmt
    if fmt == "verl":
        table = pa.Table.from_pylist([verl_row(s, i) for i, s in enumerate(rows)])
    else:
        table = pa.Table.from_pylist([trl_row(s) for s in rows])
    if fmt == "hf":
        try:
            import datasets
        except ImportError as e:
            raise UserError("export hf needs the `datasets` package: pip install datasets") from e
        datasets.Dataset(table).save_to_disk(str(out))
    else:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_parquet(table, out / "train.parquet")
        out = out / "train.parquet"
    print(f"export {fmt}: {len(rows)} samples -> {out}")
    return 0
