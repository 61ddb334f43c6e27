"""`python -m mining export`: TRL / verl Parquet layouts and a `datasets` dataset."""

import datetime as dt
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from test_store_synth import task, turns

from mining.stages.split_cmd import load_templates
from mining.store import Store
from skills.split import Reference, SplitOptions, split_turns


def _store(tmp_path):
    t = task()
    rows, _ = split_turns(turns(), {t.id: Reference(t.id, t.source, t.hash, t.structural_hash)},
                          load_templates(None), SplitOptions())
    st = Store(tmp_path)
    st.write("samples", rows)
    now = dt.datetime.now(dt.UTC)
    st.write("scores", [{"score_id": f"x{i}", "sample_id": r["sample_id"], "run_id": "r1",
                         "scorer_version": "v1", "reward": 0.5 * i, "correct": i == 1,
                         "scored_at": now} for i, r in enumerate(rows)])
    return st, rows


def _export(root, *args):
    return subprocess.run([sys.executable, "-m", "mining", "export", *args, f"store.root={root}"],
                          capture_output=True, text=True, timeout=180)


def test_trl_and_verl_layouts(tmp_path):
    _, rows = _store(tmp_path)
    p = _export(tmp_path, "trl")
    assert p.returncode == 0, p.stderr
    trl = pq.read_table(tmp_path / "export" / "trl" / "train.parquet").to_pylist()
    assert len(trl) == 2
    assert [m["role"] for m in trl[0]["prompt"]] == ["system", "user"]
    assert {r["reward"] for r in trl} == {0.0, 0.5} and all(r["scorer_version"] == "v1" for r in trl)
    p = _export(tmp_path, "verl")
    assert p.returncode == 0, p.stderr
    verl = pq.read_table(tmp_path / "export" / "verl" / "train.parquet")
    assert verl.column_names == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    r0 = verl.to_pylist()[0]
    assert r0["data_source"].startswith("kernelmine/skill") and r0["ability"] == "cuda"
    assert r0["reward_model"]["style"] == "rule" and "task_id" in r0["reward_model"]["ground_truth"]
    assert r0["extra_info"]["index"] == 0


def test_hf_dataset_and_bad_format(tmp_path):
    datasets = pytest.importorskip("datasets")
    _store(tmp_path)
    p = _export(tmp_path, "hf")
    assert p.returncode == 0, p.stderr
    ds = datasets.load_from_disk(str(tmp_path / "export" / "hf"))
    assert len(ds) == 2 and ds[0]["prompt"][0]["role"] == "system"
    p = _export(tmp_path, "csv")
    assert p.returncode == 2 and "unknown export format" in p.stderr
