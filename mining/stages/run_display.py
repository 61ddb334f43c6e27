"""Live progress and the end-of-run summary of ``mining run``."""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table


class Display:
    """A rich progress bar on a terminal; one line per finished trajectory otherwise."""

    def __init__(self, progress) -> None:
        self.p = progress
        self.console = Console(stderr=True)
        self.live = self.console.is_terminal
        self.bar = Progress(TextColumn("[bold]trajectories"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[stats]}"), TimeElapsedColumn(),
                            console=self.console, disable=not self.live)
        self.tid = self.bar.add_task("run", total=progress.total, completed=progress.skipped,
                                     stats="")
        self._last_done = 0

    def stats(self) -> str:
        p = self.p
        rate = f"{p.correct / p.done:.0%}" if p.done else "-"
        best = f"{p.best_speedup:.2f}x" if p.best_speedup is not None else "-"
        return f"in flight {p.in_flight}  correct {rate}  best {best}"

    def update(self, p) -> None:
        self.bar.update(self.tid, completed=p.skipped + p.done, stats=self.stats())
        if not self.live and p.done > self._last_done:
            self._last_done = p.done
            r = p.rows[-1]
            print(f"[{p.skipped + p.done}/{p.total}] {r['trajectory_id']} {r['stop_reason']} "
                  f"correct={r['best_correct']} speedup={r['best_speedup']}  ({self.stats()})",
                  file=sys.stderr, flush=True)

    def __enter__(self):
        self.bar.__enter__()
        return self

    def __exit__(self, *exc):
        self.bar.__exit__(*exc)


def summary_table(rows: list[dict[str, Any]], run_id: str) -> Table:
    t = Table(title=f"run {run_id}: {len(rows)} trajectories mined")
    for c in ("task", "trajectories", "correct", "best speedup", "mean turns", "stop reasons"):
        t.add_column(c)
    by = defaultdict(list)
    for r in rows:
        by[r["task_id"]].append(r)
    for task, rs in sorted(by.items()):
        sp = [r["best_speedup"] for r in rs if r["best_correct"] and r["best_speedup"] is not None]
        reasons = Counter(r["stop_reason"] for r in rs)
        t.add_row(task, str(len(rs)), f"{sum(r['best_correct'] for r in rs)}/{len(rs)}",
                  f"{max(sp):.2f}x" if sp else "-",
                  f"{sum(r['n_turns'] for r in rs) / len(rs):.1f}",
                  ", ".join(f"{k} {v}" for k, v in reasons.most_common()))
    return t
