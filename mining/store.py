"""The dataset store: one root, one folder per table, immutable Parquet parts written atomically.

Layout (documented in README.md)::

    <root>/<table>/run_id=<run id>/part-<uuid>.parquet     # trajectories, turns, samples, scores, imports
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
import pyarrow.compute  # noqa: F401  (pa.compute)
import pyarrow.parquet as pq

from mining.schemas import PRIMARY_KEY, SCHEMA_VERSION, TABLES

PARTITIONED = {"trajectories", "turns", "samples", "scores", "imports"}
COMPACTING = ".compacting"  # marker left in a partition folder while compact runs


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

    def read(self, table: str, columns: list[str] | None = None, dedupe: bool = True,
             parts: list[Path] | None = None) -> pa.Table:
        """Every part of a table as one Arrow table (empty with the schema when there is none).

        Partition folders are not read as columns: ``run_id`` is stored in every row. Parts
        written under an older schema version gain the new columns as nulls. With ``dedupe``
        one row per primary key is kept (a crash inside ``compact`` may leave a row twice).
        """
        schema = TABLES[table]
        parts = self.parts(table) if parts is None else parts
        key = PRIMARY_KEY[table]
        if not parts:
            empty = schema.empty_table()
            return empty.select(columns) if columns else empty
        want = list(columns) if columns else list(schema.names)
        if dedupe and key not in want:
            want.append(key)
        tables = [_conform(pq.read_table(p), schema, want) for p in parts]
        data = pa.concat_tables(tables)
        if dedupe:
            data = _dedupe(data, key)
        return data.select(list(columns) if columns else list(schema.names))

    def compact(self, table: str, min_parts: int = 2) -> list[Path]:
        """Merge the small parts of each partition into one part; returns the new parts.

        Crash-safe: the merged part is written atomically first, the old parts removed after;
        a crash in between leaves rows twice, and readers keep one row per primary key.
        """
        folders: dict[Path, list[Path]] = {}
        for p in self.parts(table):
            folders.setdefault(p.parent, []).append(p)
        written = []
        for folder, parts in sorted(folders.items()):
            marker = folder / COMPACTING
            if len(parts) < min_parts and not marker.exists():
                continue
            marker.touch()          # readers dedupe while this exists (see needs_dedupe)
            _fsync_dir(folder)
            merged = self.read(table, parts=parts)
            final = folder / f"part-{uuid.uuid4().hex}.parquet"
            atomic_write_parquet(merged, final)
            for p in parts:
                p.unlink()
            marker.unlink()
            _fsync_dir(folder)
            written.append(final)
        return written

    def delete(self, table: str, keys: Iterable[str]) -> int:
        """Remove the rows whose primary key is in ``keys`` (``eval --force`` retires old scores).

        Each part holding such a row is rewritten without it, as ``compact`` does: the new part
        is written atomically first, the old part removed after, under the same marker, so a
        crash in between leaves rows twice (readers dedupe) but never loses a row it should keep.
        """
        want = pa.array(sorted(set(keys)), pa.string())
        if len(want) == 0:
            return 0
        key, removed = PRIMARY_KEY[table], 0
        for part in self.parts(table):
            data = pq.read_table(part)
            hit = pa.compute.is_in(data.column(key).cast(pa.string()), value_set=want)
            n = pa.compute.sum(hit).as_py() or 0
            if not n:
                continue
            marker = part.parent / COMPACTING
            ours = not marker.exists()  # an interrupted compact's marker stays for compact
            marker.touch()
            _fsync_dir(part.parent)
            kept = data.filter(pa.compute.invert(hit))
            if kept.num_rows:
                atomic_write_parquet(kept, part.parent / f"part-{uuid.uuid4().hex}.parquet")
            part.unlink()
            if ours:
                marker.unlink()
            _fsync_dir(part.parent)
            removed += n
        return removed

    def needs_dedupe(self, table: str) -> bool:
        """True when a compaction of the table was interrupted (its marker file is left)."""
        d = self.table_dir(table)
        return d.is_dir() and any(d.rglob(COMPACTING))

    def keys(self, table: str) -> set[str]:
        """The primary keys already stored (for resumable, idempotent stages)."""
        key = PRIMARY_KEY[table]
        return set(self.read(table, columns=[key]).column(key).to_pylist())

    def glob(self, table: str) -> str:
        """The read_parquet glob DuckDB uses for a table."""
        return str(self.table_dir(table) / "**" / "*.parquet")

    def connect(self, dedupe: bool | str = "auto", threads: int | None = None):
        """A DuckDB connection with one view per table (duckdb imported here, lazily).

        Each view is ``read_parquet(<glob>, union_by_name=true)`` over every part in place; a
        table without parts is an empty view with the table's schema. A deduping view keeps one
        row per primary key: ``dedupe=True`` always, ``"auto"`` only while an interrupted
        compaction left duplicates (a window over every row is 3x the cost of a query).
        """
        import duckdb

        con = duckdb.connect()
        if threads:
            con.execute(f"SET threads = {int(threads)}")
        for table, schema in TABLES.items():
            if not self.parts(table):
                con.register(f"_empty_{table}", schema.empty_table())
                con.execute(f"CREATE VIEW {table} AS SELECT * FROM _empty_{table}")
                continue
            glob = self.glob(table).replace("'", "''")
            src = (f"read_parquet('{glob}', union_by_name=true, hive_partitioning=false)")
            sql = f"SELECT * FROM {src}"
            if dedupe is True or (dedupe == "auto" and self.needs_dedupe(table)):
                sql += f" QUALIFY row_number() OVER (PARTITION BY {PRIMARY_KEY[table]}) = 1"
            con.execute(f"CREATE VIEW {table} AS {sql}")
        return con


def _conform(t: pa.Table, schema: pa.Schema, names: list[str]) -> pa.Table:
    """Columns ``names`` of ``t`` in the table schema's types; missing ones as nulls."""
    cols = []
    for n in names:
        f = schema.field(n)
        cols.append(t.column(n).cast(f.type) if n in t.column_names
                    else pa.nulls(t.num_rows, f.type))
    return pa.table(cols, names=names)


def _dedupe(t: pa.Table, key: str) -> pa.Table:
    """Keep the first row of each primary key."""
    if t.num_rows == 0:
        return t
    idx = pa.array(range(t.num_rows), pa.int64())
    first = (pa.table({"k": t.column(key), "i": idx}).group_by("k", use_threads=False)
             .aggregate([("i", "min")]).column("i_min"))
    if len(first) == t.num_rows:
        return t
    return t.take(pa.compute.take(first, pa.compute.sort_indices(first)))


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
