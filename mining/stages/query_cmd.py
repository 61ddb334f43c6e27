"""``python -m mining query "SQL" | <canned name> [--csv|--json|--format X]``.

DuckDB views named after the tables (``runs``, ``trajectories``, ``turns``, ``samples``,
``scores``, ``checkpoints``) read every Parquet part in place. Canned queries are the files in
``mining/queries/*.sql``; pass their name instead of SQL.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mining.errors import UserError
from mining.store import Store

QUERIES_DIR = Path(__file__).resolve().parent.parent / "queries"
FORMATS = ("table", "csv", "json")


def canned() -> dict[str, Path]:
    return {p.stem: p for p in sorted(QUERIES_DIR.glob("*.sql"))}


def resolve_sql(text: str) -> str:
    """A canned query's SQL by name, else the text itself."""
    queries = canned()
    if text in queries:
        return queries[text].read_text()
    if " " not in text.strip() and not text.strip().lower().startswith(("select", "with")):
        raise UserError(f"no canned query {text!r}; canned queries: {', '.join(queries)} "
                        "(or pass SQL in quotes)")
    return text


def parse_args(args: list[str], default_format: str) -> tuple[str, str]:
    fmt, sql, it = default_format, [], iter(args)
    for a in it:
        if a in ("--csv", "--json", "--table"):
            fmt = a[2:]
        elif a == "--format":
            fmt = next(it, "")
        else:
            sql.append(a)
    if fmt not in FORMATS:
        raise UserError(f"unknown output format {fmt!r}; use one of {', '.join(FORMATS)}")
    if not sql:
        raise UserError("query needs SQL or a canned query name: "
                        f"python -m mining query \"SELECT ...\" | {' | '.join(canned())}")
    return " ".join(sql), fmt


def run_query(store: Store, sql: str, dedupe: bool | str = "auto", threads: int | None = None):
    """Run SQL (or a canned name) over the store's views; returns (column names, rows)."""
    import duckdb

    con = store.connect(dedupe=dedupe, threads=threads)
    try:
        cur = con.execute(resolve_sql(sql))
    except duckdb.Error as e:
        raise UserError(f"query failed: {str(e).splitlines()[0]}") from e
    cols = [d[0] for d in cur.description] if cur.description else []
    return cols, cur.fetchall()


def _cell(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "" if v is None else str(v)


def render(cols: list[str], rows: list[tuple], fmt: str, out=None) -> None:
    out = out or sys.stdout
    if fmt == "json":
        print(json.dumps([dict(zip(cols, r, strict=True)) for r in rows], default=str), file=out)
    elif fmt == "csv":
        import csv

        w = csv.writer(out, lineterminator="\n")
        w.writerow(cols)
        w.writerows(rows)
    else:
        from rich.console import Console
        from rich.table import Table

        t = Table(caption=f"{len(rows)} rows")
        for c in cols:
            t.add_column(c, overflow="fold")
        for r in rows:
            t.add_row(*map(_cell, r))
        Console(file=out, width=200).print(t)


def main(cfg, args: list[str]) -> int:
    sql, fmt = parse_args(args, str(cfg.store.format))
    dedupe = cfg.store.dedupe if cfg.store.dedupe == "auto" else bool(cfg.store.dedupe)
    cols, rows = run_query(Store(cfg.store.root), sql, dedupe, cfg.store.threads)
    render(cols, rows, fmt)
    return 0
