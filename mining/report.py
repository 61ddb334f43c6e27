"""The HTML report: PNG plots (matplotlib, Agg) of the store's scores and training logs.

Every figure comes from a canned query in ``mining/queries`` (or the train JSONL logs), so the
numbers on the page are the numbers ``python -m mining query <name>`` prints.
"""

from __future__ import annotations

import datetime as dt
import html
import json
from pathlib import Path

from mining.stages.query_cmd import run_query
from mining.store import Store

TRAIN_KEYS = ("reward_mean", "kl", "loss", "reward_std")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _rows(store: Store, sql: str) -> list[dict]:
    cols, rows = run_query(store, sql)
    return [dict(zip(cols, r, strict=True)) for r in rows]


def reward_histograms(store: Store, out: Path, bins: int) -> Path | None:
    rows = _rows(store, "SELECT skill, round, reward FROM scores WHERE reward IS NOT NULL")
    if not rows:
        return None
    plt = _plt()
    skills = sorted({r["skill"] for r in rows})
    rounds = sorted({r["round"] for r in rows})
    top = max(r["reward"] for r in rows) or 1.0
    fig, axes = plt.subplots(1, len(skills), figsize=(6 * len(skills), 4), squeeze=False)
    for ax, sk in zip(axes[0], skills, strict=True):
        for rd in rounds:
            vals = [r["reward"] for r in rows if r["skill"] == sk and r["round"] == rd]
            if vals:
                ax.hist(vals, bins=bins, range=(0, top), alpha=0.55, label=f"round {rd} (n={len(vals)})")
        ax.set_title(f"Skill {sk}: reward distribution")
        ax.set_xlabel("reward")
        ax.set_ylabel("samples")
        ax.legend()
    return _save(fig, out / "reward_hist.png")


def best_speedups(store: Store, out: Path) -> tuple[Path | None, list[dict]]:
    rows = _rows(store, "best_per_task")
    if not rows:
        return None, rows
    plt = _plt()
    import numpy as np

    x = np.arange(len(rows))
    eager = [r["speedup"] or 0.0 for r in rows]
    comp = [r["speedup_vs_compile"] if r["speedup_vs_compile"] is not None else np.nan for r in rows]
    fig, ax = plt.subplots(figsize=(max(6, 0.7 * len(rows) + 2), 4.5))
    ax.bar(x - 0.2, eager, 0.4, label="vs eager")
    ax.bar(x + 0.2, comp, 0.4, label="vs torch.compile")
    ax.axhline(1.0, color="k", lw=0.8, ls="--")
    ax.set_xticks(x, [r["task_id"] for r in rows], rotation=45, ha="right")
    ax.set_ylabel("best speedup (correct, no major hack)")
    ax.set_title("Best speedup per task")
    top = max([v for v in eager + comp if v == v] + [1.0])
    ax.set_ylim(0, top * 1.25)   # headroom so the legend never covers a bar
    ax.legend(loc="upper left", ncols=2)
    return _save(fig, out / "best_speedup.png"), rows


def hacks_over_rounds(store: Store, out: Path) -> Path | None:
    rows = _rows(store, "hack_by_round")
    if not rows:
        return None
    plt = _plt()
    rounds = sorted({r["round"] for r in rows})
    cats = sorted({r["category"] for r in rows})
    fig, ax = plt.subplots(figsize=(7, 4))
    for c in cats:
        rate = {r["round"]: r["rate"] for r in rows if r["category"] == c}
        ax.plot(rounds, [100 * rate.get(rd, 0.0) for rd in rounds], marker="o", label=c)
    ax.set_xticks(rounds)
    ax.set_xlabel("mining round")
    ax.set_ylabel("% of scored samples")
    ax.set_title("Hack categories over rounds")
    ax.legend(fontsize=8)
    return _save(fig, out / "hacks_by_round.png")


def training_curves(root: Path, out: Path) -> Path | None:
    logs = sorted((root / "train").glob("*.jsonl"))
    series: dict[str, dict[str, tuple[list, list]]] = {}
    for log in logs:
        for line in log.read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            for k in TRAIN_KEYS:
                if isinstance(rec.get(k), int | float) and "step" in rec:
                    xs, ys = series.setdefault(k, {}).setdefault(log.stem, ([], []))
                    xs.append(rec["step"])
                    ys.append(rec[k])
    if not series:
        return None
    plt = _plt()
    keys = [k for k in TRAIN_KEYS if k in series]
    fig, axes = plt.subplots(1, len(keys), figsize=(5 * len(keys), 3.8), squeeze=False)
    for ax, k in zip(axes[0], keys, strict=True):
        for run, (xs, ys) in series[k].items():
            ax.plot(xs, ys, label=run)
        ax.set_title(k)
        ax.set_xlabel("step")
        ax.legend(fontsize=8)
    return _save(fig, out / "training.png")


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _plt().close(fig)
    return path


def _table(rows: list[dict], cols: list[str]) -> str:
    def cell(v):
        return f"{v:.3g}" if isinstance(v, float) else html.escape("" if v is None else str(v))

    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{cell(r.get(c))}</td>" for c in cols) + "</tr>"
                   for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


CSS = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
       "img{max-width:100%;border:1px solid #ddd}table{border-collapse:collapse;margin:1em 0}"
       "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:right}"
       "th{background:#f3f3f3}.empty{color:#888}")


def build(root: str | Path, out: str | Path | None = None, bins: int = 30) -> Path:
    """Write ``index.html`` and its PNGs; returns the page's path."""
    store = Store(root)
    out = Path(out) if out else store.root / "report"
    out.mkdir(parents=True, exist_ok=True)
    counts = {t: _rows(store, f"SELECT count(*) AS n FROM {t}")[0]["n"]
              for t in ("runs", "trajectories", "turns", "samples", "scores", "checkpoints",
                        "imports")}
    best_png, best_rows = best_speedups(store, out)
    sections = [
        ("Reward distribution per skill and round", reward_histograms(store, out, bins), ""),
        ("Best speedup per task", best_png,
         _table(best_rows, ["task_id", "speedup", "speedup_vs_compile", "reward", "skill",
                            "round", "sample_id"])),
        ("Hack categories over rounds", hacks_over_rounds(store, out),
         _table(_rows(store, "hack_rate"), ["category", "n_samples", "rate", "n_major"])),
        ("Training curves", training_curves(store.root, out), ""),
    ]
    from mining.report_imports import sections as import_sections

    imported = import_sections(store, out, bins)  # programs scored by `eval <run dir>`, if any
    parts = [f"<h1>kernelmine report</h1><p>dataset root <code>{html.escape(str(store.root))}"
             f"</code>, generated {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC</p>",
             _table([counts], list(counts))]
    for title, png, extra in sections:
        parts.append(f"<h2>{html.escape(title)}</h2>")
        parts.append(f'<img src="{png.name}" alt="{html.escape(title)}">' if png
                     else '<p class="empty">no data yet</p>')
        parts.append(extra)
    for title, png, extra in imported:  # tables without a plot are not "no data"
        parts.append(f"<h2>{html.escape(title)}</h2>")
        if png or not extra:
            parts.append(f'<img src="{png.name}" alt="{html.escape(title)}">' if png
                         else '<p class="empty">no data yet</p>')
        parts.append(extra)
    page = out / "index.html"
    page.write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>kernelmine report"
                    f"</title><style>{CSS}</style></head><body>{''.join(parts)}</body></html>")
    return page
