"""The dataset store: one root, one folder per table, immutable Parquet parts written atomically.

Layout (documented in README.md)::

    <root>/<table>/run_id=<run id>/part-<uuid>.parquet     # trajectories, turns, samples, scores
    <root>/<table>/part-<uuid>.parquet                     # runs, checkpoints

A part is written to a hidden temporary file in the same folder, fsynced, then renamed into
place: a crash leaves either the whole part or nothing. DuckDB reads all parts in place.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from mining.schemas import PRIMARY_KEY, SCHEMA_VERSION, TABLES

PARTITIONED = {"trajectories", "turns", "samples", "scores"}


class Store:
    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root).expanduser()

    # -- writing ---------------------------------------------------------------------------
    def table_dir(self, table: str) -> Path:
        if table not in TABLES:
            raise KeyError(f"unknown table {table!r}; tables: {', '.join(TABLES)}")
        return self.root / table

    def to_arrow(self, table: str, rows: Iterable[Mapping[str, Any]]) -> pa.Table:
        """Rows (dicts) to an Arrow table of the table's schema; unknown keys are an error."""
        schema = TABLES[table]
        rows = [dict(r) for r in rows]
        names = set(schema.names)
        for r in rows:
            extra = set(r) - names
            if extra:
                raise ValueError(f"{table}: unknown column(s) {sorted(extra)}")
            if "schema_version" in names:
                r.setdefault("schema_version", SCHEMA_VERSION)
        return pa.Table.from_pylist(rows, schema=schema)

    def write(self, table: str, rows: Iterable[Mapping[str, Any]] | pa.Table,
              partition: str | None = None) -> Path | None:
        """Atomically write one part; returns its path (None when there were no rows)."""
        data = rows if isinstance(rows, pa.Table) else self.to_arrow(table, rows)
        if data.num_rows == 0:
            return None
        folder = self.table_dir(table)
        if table in PARTITIONED:
            if partition is None:
                ids = set(data.column("run_id").to_pylist())
                if len(ids) != 1:
                    raise ValueError(f"{table}: a part must hold one run_id, got {sorted(map(str, ids))}")
                partition = str(ids.pop())
            folder = folder / f"run_id={partition}"
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / f"part-{uuid.uuid4().hex}.parquet"
        atomic_write_parquet(data, final)
        return final

    # -- reading ---------------------------------------------------------------------------
    def parts(self, table: str) -> list[Path]:
        d = self.table_dir(table)
        return sorted(p for p in d.rglob("*.parquet") if not p.name.startswith(".")) if d.is_dir() else []

    def read(self, table: str, columns: list[str] | None = None) -> pa.Table:
        """Every part of a table as one Arrow table (empty with the schema when there is none).

        Partition folders are not read as columns: ``run_id`` is stored in every row.
        """
        schema = TABLES[table]
        parts = self.parts(table)
        if not parts:
            empty = schema.empty_table()
            return empty.select(columns) if columns else empty
        tables = [pq.read_table(p, columns=columns, schema=schema if columns is None else None)
                  for p in parts]
        return pa.concat_tables(tables, promote_options="default")

    def keys(self, table: str) -> set[str]:
        """The primary keys already stored (for resumable, idempotent stages)."""
        key = PRIMARY_KEY[table]
        return set(self.read(table, columns=[key]).column(key).to_pylist())

    def glob(self, table: str) -> str:
        """The read_parquet glob DuckDB uses for a table."""
        return str(self.table_dir(table) / "**" / "*.parquet")


def atomic_write_parquet(data: pa.Table, final: Path) -> None:
    tmp = final.with_name(f".{final.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as fh:
            pq.write_table(data, fh, compression="zstd")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            tmp.unlink()
    _fsync_dir(final.parent)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
