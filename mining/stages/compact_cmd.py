"""``python -m mining compact [table ...]``: merge each partition's small parts into one."""

from __future__ import annotations

from mining.errors import UserError
from mining.schemas import TABLES
from mining.store import Store


def main(cfg, args: list[str]) -> int:
    bad = [a for a in args if a not in TABLES]
    if bad:
        raise UserError(f"unknown table {bad[0]!r}; tables: {', '.join(TABLES)}")
    store = Store(cfg.store.root)
    for table in args or list(TABLES):
        before = len(store.parts(table))
        new = store.compact(table, min_parts=int(cfg.store.compact_min_parts))
        print(f"{table}: {before} parts -> {len(store.parts(table))} ({len(new)} merged)")
    return 0
