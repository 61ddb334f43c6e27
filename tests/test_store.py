"""The Parquet store: atomic parts, dedupe on read, compaction, schema evolution, DuckDB views."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_store_synth import scores

from mining.schemas import SCORES
from mining.store import COMPACTING, Store


def test_write_read_roundtrip_and_keys(tmp_path):
    st = Store(tmp_path)
    st.write("scores", scores(10))
    st.write("scores", [dict(r, score_id="x" + r["score_id"]) for r in scores(5, run_id="r2")])
    t = st.read("scores")
    assert t.num_rows == 15 and t.schema == SCORES
    assert "s3" in st.keys("scores") and len(st.keys("scores")) == 15
    assert (tmp_path / "scores" / "run_id=r2").is_dir()


def test_unknown_column_and_mixed_runs_are_errors(tmp_path):
    st = Store(tmp_path)
    with pytest.raises(ValueError, match="unknown column"):
        st.write("scores", [{"score_id": "a", "run_id": "r", "bogus": 1}])
    with pytest.raises(ValueError, match="one run_id"):
        st.write("scores", [{"score_id": "a", "run_id": "r"}, {"score_id": "b", "run_id": "q"}])


def test_compact_merges_parts_and_a_crash_midway_duplicates_nothing(tmp_path):
    st = Store(tmp_path)
    rows = scores(30)
    for i in range(0, 30, 5):
        st.write("scores", rows[i:i + 5])
    assert len(st.parts("scores")) == 6
    # simulate a crash after the merged part was written but before old parts were removed
    folder = st.parts("scores")[0].parent
    (folder / COMPACTING).touch()
    pq.write_table(st.read("scores"), folder / "part-crashed.parquet")
    assert st.read("scores").num_rows == 30          # readers dedupe by primary key
    assert st.needs_dedupe("scores")
    con = st.connect()                               # dedupe="auto": the marker is there
    assert con.execute("select count(*) from scores").fetchone()[0] == 30
    assert st.connect(dedupe=False).execute("select count(*) from scores").fetchone()[0] == 60
    st.compact("scores")
    assert len(st.parts("scores")) == 1 and not st.needs_dedupe("scores")
    assert st.read("scores", dedupe=False).num_rows == 30
    assert sorted(st.keys("scores")) == sorted(r["score_id"] for r in rows)


def test_old_schema_parts_read_with_new_columns_as_null(tmp_path):
    st = Store(tmp_path)
    old = pa.table({"sample_id": ["a"], "skill": pa.array([1], pa.int8()), "run_id": ["r"]})
    d = tmp_path / "samples" / "run_id=r"
    d.mkdir(parents=True)
    pq.write_table(old, d / "part-old.parquet")
    st.write("samples", [{"sample_id": "b", "skill": 2, "run_id": "r", "negative": True}])
    t = st.read("samples")
    assert t.num_rows == 2 and t.column("negative").to_pylist().count(None) == 1
    con = st.connect()
    assert con.execute("select count(*) from samples where negative").fetchone()[0] == 1


def test_empty_tables_are_empty_views_with_the_schema(tmp_path):
    con = Store(tmp_path).connect()
    cur = con.execute("select * from scores")
    assert cur.fetchall() == [] and [d[0] for d in cur.description] == SCORES.names
    assert con.execute("select count(*) from turns").fetchone()[0] == 0
