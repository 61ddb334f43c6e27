"""Reward-distribution query over a synthetic store of 1,000,000 scored samples.

    python bench/store_query.py [--rows 1000000] [--parts 20] [--root /tmp/km_bench]

Builds (once) a store with ``samples`` and ``scores`` parts, then times the canned
``reward_by_skill`` query in DuckDB over the Parquet views (the views dedupe by primary key, as
``python -m mining query`` does) and the same computation in Polars (``scan_parquet``), and
prints both and their ratio. Target: under 1 s on 2 cores.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mining.schemas import SAMPLES, SCORES  # noqa: E402
from mining.stages.query_cmd import run_query  # noqa: E402
from mining.store import Store  # noqa: E402


def build(root: Path, rows: int, parts: int, n_tasks: int = 50) -> Store:
    st = Store(root)
    if st.parts("scores"):
        return st
    rng = np.random.default_rng(0)
    per = rows // parts
    for p in range(parts):
        ids = np.char.add("s", np.arange(p * per, (p + 1) * per).astype(str))
        skill = rng.integers(1, 3, per).astype(np.int8)
        rnd = np.full(per, p % 4, np.int32)
        task = np.char.add("L3_", rng.integers(1, n_tasks + 1, per).astype(str))
        correct = rng.random(per) < 0.6
        speed = np.where(correct, rng.lognormal(0.0, 0.5, per), np.nan)
        reward = np.where(correct, np.minimum(np.nan_to_num(speed), 5) + 0.3, 0.0)
        run = f"run{p % 4}"
        n = lambda a: pa.array(a)  # noqa: E731
        samples = {"sample_id": n(ids), "skill": n(skill), "task_id": n(task),
                   "run_id": pa.array([run] * per), "round": n(rnd)}
        st.write("samples", _table(SAMPLES, samples, per), partition=run)
        scores = {"score_id": np.char.add("x", ids), "sample_id": ids, "scorer_version": "v1",
                  "skill": skill, "task_id": task, "correct": correct,
                  "speedup": pa.array(speed, from_pandas=True), "reward": reward,
                  "run_id": run, "round": rnd}
        st.write("scores", _table(SCORES, scores, per), partition=run)
    return st


def _table(schema: pa.Schema, cols: dict, n: int) -> pa.Table:
    arrays = []
    for f in schema:
        v = cols.get(f.name)
        if v is None:
            arrays.append(pa.nulls(n, f.type))
        elif isinstance(v, str):
            arrays.append(pa.array([v] * n, f.type))
        else:
            arrays.append(pa.array(v, f.type) if not isinstance(v, pa.Array) else v.cast(f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def polars_reward_by_skill(store: Store, dedupe: bool = False):
    import polars as pl

    lf = pl.scan_parquet(store.glob("scores"), hive_partitioning=False)
    if dedupe:
        lf = lf.unique(subset="score_id", keep="any")
    return (lf.group_by("skill", "round", "task_id")
            .agg(n=pl.len(), reward_mean=pl.col("reward").mean(),
                 reward_std=pl.col("reward").std(), reward_min=pl.col("reward").min(),
                 reward_p50=pl.col("reward").quantile(0.5, "linear"),
                 reward_p90=pl.col("reward").quantile(0.9, "linear"),
                 reward_max=pl.col("reward").max(),
                 correct_rate=pl.col("correct").cast(pl.Float64).mean())
            .sort("skill", "round", "task_id").collect())


def best_of(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--parts", type=int, default=20)
    ap.add_argument("--root", default="/tmp/km_bench_store")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    t0 = time.perf_counter()
    st = build(Path(a.root), a.rows, a.parts)
    print(f"store: {a.rows:,} samples + scores in {len(st.parts('scores'))} parts "
          f"({time.perf_counter() - t0:.1f} s to build or open) at {a.root}")
    t_duck, (cols, rows) = best_of(lambda: run_query(st, "reward_by_skill"), a.repeat)
    t_pl, df = best_of(lambda: polars_reward_by_skill(st), a.repeat)
    t_duck_d, _ = best_of(lambda: run_query(st, "reward_by_skill", dedupe=True), a.repeat)
    t_pl_d, _ = best_of(lambda: polars_reward_by_skill(st, dedupe=True), a.repeat)
    assert len(rows) == df.height, (len(rows), df.height)
    n_total = sum(r[cols.index("n")] for r in rows)
    assert n_total == a.rows == int(df["n"].sum()), n_total
    print(f"{'reward_by_skill over 1 table':<40}{'duckdb s':>10}{'polars s':>10}{'ratio':>8}")
    for name, d, p in (("as `mining query` runs it (no dup)", t_duck, t_pl),
                       ("forced dedupe by primary key", t_duck_d, t_pl_d)):
        print(f"{name:<40}{d:>10.3f}{p:>10.3f}{d / p:>8.2f}")
    print(f"groups: {len(rows)}   duckdb target < 1 s: {'met' if t_duck < 1 else 'missed'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
