"""The report's "Imported runs" sections: programs scored by ``eval <run dir | tree | .jsonl>``.

Verdict and finding distributions per producer and per task, the speedup distribution (here and
as KernelBench recorded it), and the disagreements with KernelBench's verdicts. The disagreement
tables are the canned queries ``disagreement_counts`` and ``disagreements``.
"""

from __future__ import annotations

import html
from pathlib import Path

from mining.ingest.verdicts import KINDS
from mining.store import Store

# imports joined with their newest score: a program scored under several versions counts once
_JOINED = """
  SELECT i.source_run, coalesce(i.producer, '(unknown)') AS producer,
         coalesce(i.task_id, '(unresolved)') AS task_id, i.error, i.kb_correct, i.kb_speedup,
         s.status, s.correct, s.speedup, s.hack_categories, s.major_hack, s.scorer_version
  FROM imports i LEFT JOIN scores s USING (sample_id)
  QUALIFY row_number() OVER (PARTITION BY i.sample_id ORDER BY s.scored_at DESC NULLS LAST) = 1
"""


def _status_pivot(rows: list[dict], by: str) -> tuple[list[dict], list[str]]:
    """One row per ``by`` value: n, status counts, correct here / per KernelBench."""
    statuses = sorted({r["status"] or "not evaluated" for r in rows})
    out: dict[str, dict] = {}
    for r in rows:
        d = out.setdefault(r[by], {by: r[by], "n": 0, "correct": 0, "kb_correct": 0,
                                   **dict.fromkeys(statuses, 0)})
        d["n"] += 1
        d[r["status"] or "not evaluated"] += 1
        d["correct"] += bool(r["correct"])
        d["kb_correct"] += r["kb_correct"] is True
    return [out[k] for k in sorted(out)], [by, "n", *statuses, "correct", "kb_correct"]


def _findings(rows: list[dict], by: str) -> tuple[list[dict], list[str]]:
    cats = sorted({c for r in rows for c in (r["hack_categories"] or [])})
    out: dict[str, dict] = {}
    for r in rows:
        d = out.setdefault(r[by], {by: r[by], "scored": 0, "major": 0, **dict.fromkeys(cats, 0)})
        d["scored"] += r["status"] is not None
        d["major"] += bool(r["major_hack"])
        for c in set(r["hack_categories"] or []):
            d[c] += 1
    return [out[k] for k in sorted(out)], [by, "scored", "major", *cats]


def speedup_histogram(rows: list[dict], out: Path, bins: int) -> Path | None:
    from mining.report import _plt, _save

    here = [r["speedup"] for r in rows if r["correct"] and r["speedup"]]
    kb = [r["kb_speedup"] for r in rows if r["kb_correct"] and r["kb_speedup"]]
    if not here and not kb:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4))
    top = max(here + kb)
    for vals, label in ((here, "this harness (correct)"), (kb, "KernelBench (recorded)")):
        if vals:
            ax.hist(vals, bins=bins, range=(0, top), alpha=0.55, label=f"{label}, n={len(vals)}")
    ax.axvline(1.0, color="k", lw=0.8, ls="--")
    ax.set_xlabel("speedup over the eager reference")
    ax.set_ylabel("programs")
    ax.set_title("Imported programs: speedup distribution")
    ax.legend()
    return _save(fig, out / "import_speedup.png")


def sections(store: Store, out: Path, bins: int) -> list[tuple[str, Path | None, str]]:
    """(title, png, html) sections for the report; none when nothing was imported."""
    from mining.report import _rows, _table

    rows = _rows(store, _JOINED)
    if not rows:
        return []
    counts = _rows(store, "disagreement_counts")
    runs = _rows(store, "SELECT source_run, any_value(producer) AS producer, count(*) AS programs, "
                        "count(error) AS not_evaluated, count(kb_correct) AS with_kb_verdict "
                        "FROM imports GROUP BY source_run ORDER BY source_run")
    legend = "<ul>" + "".join(f"<li><b>{k}</b>: {html.escape(v)}</li>" for k, v in KINDS.items()) + "</ul>"
    dis = _rows(store, "disagreements")
    by_prod, cols_p = _status_pivot(rows, "producer")
    by_task, cols_t = _status_pivot(rows, "task_id")
    f_prod, fcols_p = _findings(rows, "producer")
    f_task, fcols_t = _findings(rows, "task_id")
    return [
        ("Imported runs", None,
         _table(runs, ["source_run", "producer", "programs", "not_evaluated", "with_kb_verdict"])),
        ("Imported runs: disagreements with KernelBench", None, legend + _table(
            counts, ["source_run", "scorer_version", "n_both", *KINDS])
         + _table(dis[:200], ["kind", "source_run", "producer", "task_id", "sample_index",
                              "kb_correct", "status", "correct", "reward", "hack_categories"])),
        ("Imported runs: verdicts per producer", None, _table(by_prod, cols_p)),
        ("Imported runs: verdicts per task", None, _table(by_task, cols_t)),
        ("Imported runs: findings per producer", None, _table(f_prod, fcols_p)),
        ("Imported runs: findings per task", None, _table(f_task, fcols_t)),
        ("Imported runs: speedup distribution", speedup_histogram(rows, out, bins), ""),
    ]
