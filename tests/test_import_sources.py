"""Finding programs to import (KernelBench runs, trees, JSONL), mapping them to tasks, KernelBench's
verdict columns, the disagreement kinds and the store's delete (what `eval --force` uses)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf

from mining.ingest.resolve import Resolver
from mining.ingest.sources import discover
from mining.ingest.verdicts import disagreements, kb_columns
from mining.store import COMPACTING, Store

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TINY = (HERE / "candidates" / "tiny_task.py").read_text()
# pure PyTorch ModelNew for tiny_task: nothing to build, evaluates in a second on CPU
PY_GOOD = TINY.replace("class Model(", "class ModelNew(").split("\ndef get_inputs")[0]
PY_WRONG = PY_GOOD.replace("gelu", "relu")


def kb_dir(root: Path) -> Path:
    level = root / "KernelBench" / "level3"
    level.mkdir(parents=True)
    (level / "1_TinyGelu.py").write_text(TINY)
    (level / "2_Broken.py").write_text("import no_such_module_xyz\n" + TINY)
    return root


def test_kernelbench_run_both_eval_results_formats_and_bad_files(tmp_path):
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "level_3_problem_1_sample_0_kernel.py").write_text(PY_GOOD)
    (run / "level_3_problem_1_sample_1_kernel.py").write_text("```python\nimport torch\n")  # truncated
    (run / "level_3_problem_2_sample_0_kernel.py").write_bytes(b"# caf\xe9\nclass ModelNew: pass\n")
    (run / "problem_7_kernel.py").write_text(PY_GOOD)   # forks drop level and sample
    (run / "notes.py").write_text("x = 1\n")           # not a program of the run
    # a fork's {"<P>": record} and KernelBench's {"<P>": [record]} in one file
    (run / "eval_results.json").write_text(json.dumps({
        "1": [{"sample_id": 0, "compiled": True, "correctness": True, "runtime": 2.0,
               "ref_runtime": 3.0, "metadata": {"hardware": "A100"}},
              {"sample_id": 1, "compiled": False, "correctness": False, "runtime": -1.0}],
        "7": {"sample_id": 0, "compiled": True, "correctness": False, "runtime": -1.0}}))
    (run / "generation_config.yaml").write_text("model_name: gemini-2.5-pro\nlevel: 3\n")
    cands, notes = discover(tmp_path / "runs")   # a runs/ folder: each sub-folder is one run
    assert notes == []
    by = {c.key: c for c in cands}
    assert sorted(by) == ["level_3_problem_1_sample_0_kernel.py", "level_3_problem_1_sample_1_kernel.py",
                          "level_3_problem_2_sample_0_kernel.py", "problem_7_kernel.py"]
    good = by["level_3_problem_1_sample_0_kernel.py"]
    assert (good.level, good.problem, good.sample, good.run, good.producer, good.error) == (
        3, 1, 0, "r1", "gemini-2.5-pro", None)
    assert kb_columns(good.kb) | {} == {
        "kb_compiled": True, "kb_correct": True, "kb_runtime_ms": 2.0, "kb_ref_runtime_ms": 3.0,
        "kb_speedup": 1.5, "kb_hardware": "A100", "kb_metadata_json": '{"hardware": "A100"}'}
    assert by["level_3_problem_1_sample_1_kernel.py"].error == "it defines no ModelNew"
    assert kb_columns(by["level_3_problem_1_sample_1_kernel.py"].kb)["kb_runtime_ms"] is None
    assert by["level_3_problem_2_sample_0_kernel.py"].error == "it is not UTF-8 text"
    fork = by["problem_7_kernel.py"]
    assert (fork.level, fork.problem, fork.sample, fork.kb["correctness"]) == (3, 7, 0, False)
    (run / "eval_results.json").write_text("{not json")
    cands, notes = discover(run, run_name="renamed")
    assert all(c.kb is None and c.run == "renamed" for c in cands)
    assert len(notes) == 1 and "eval_results.json: it is not valid JSON" in notes[0]


def test_resolver_maps_kernelbench_ids_and_says_why_not(tmp_path):
    kb = kb_dir(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    for p in (1, 2, 3):
        (run / f"level_3_problem_{p}_sample_0_kernel.py").write_text(PY_GOOD)
    cands, _ = discover(run)
    res = Resolver(OmegaConf.create({"kind": "dir", "root": str(kb), "level": 3}))
    (t1, e1), (t2, e2), (t3, e3) = (res(c) for c in cands)
    assert t1.id == "L3_1" and e1 is None and t1.source == TINY
    assert t2 is None and "its reference does not load" in e2 and "no_such_module_xyz" in e2
    assert t3 is None and e3.startswith("unknown task id: level 3 problem 3 is not in")
    suite = Resolver(OmegaConf.create({"kind": "suite", "suite": "level3"}))
    t, why = suite(cands[0])
    assert t is None and "task=kernelbench task.root=" in why


def test_tree_and_jsonl_sources(tmp_path):
    kb = kb_dir(tmp_path / "kb")
    tree = tmp_path / "agent_out"
    (tree / "1_TinyGelu").mkdir(parents=True)
    (tree / "1_TinyGelu" / "try1.py").write_text(PY_GOOD)
    (tree / "mytask").mkdir()
    (tree / "mytask" / "reference.py").write_text(TINY.replace("BATCH = 8", "BATCH = 2"))
    (tree / "mytask" / "a.py").write_text(PY_WRONG)
    (tree / "nowhere").mkdir()
    (tree / "nowhere" / "b.py").write_text(PY_GOOD)
    (tree / "stray.py").write_text(PY_GOOD)
    cands, notes = discover(tree)
    assert [c.key for c in cands] == ["1_TinyGelu/try1.py", "mytask/a.py", "nowhere/b.py"]
    assert len(notes) == 1 and "stray.py" in notes[0]
    res = Resolver(OmegaConf.create({"kind": "dir", "root": str(kb), "level": 3}))
    (t1, _), (t2, _), (t3, e3) = (res(c) for c in cands)
    assert t1.id == "L3_1"
    assert t2.id == "mytask" and "BATCH = 2" in t2.source
    assert t3 is None and "unknown task id 'nowhere'" in e3

    jl = tmp_path / "gens.jsonl"
    rows = [{"task": "L3_1", "code": PY_GOOD, "model": "m1", "correctness": True, "compiled": True},
            {"level": 3, "problem_id": 1, "code": PY_WRONG, "sample_id": 4},
            {"reference": "kb/KernelBench/level3/1_TinyGelu.py", "code": PY_GOOD, "id": "x9"},
            {"task": "L3_1"}, {"code": PY_GOOD}]
    jl.write_text("\n".join(map(json.dumps, rows)) + "\n\nnot json\n")
    cands, _ = discover(jl)
    assert [c.key for c in cands] == ["jsonl:1", "jsonl:2", "jsonl:x9", "jsonl:4", "jsonl:5",
                                      "jsonl:7"]
    assert cands[0].producer == "m1" and cands[0].kb == {"compiled": True, "correctness": True}
    assert cands[1].task_ref == "level_3_problem_1" and cands[1].sample == 4
    assert [c.error for c in cands[3:]] == [
        "line 4 has no `code` string",
        "it names no task (`task`, `level` + `problem_id`, or `reference`)",
        "line 7 is not a JSON object"]
    assert [res(c)[0].id for c in cands[:2]] == ["L3_1", "L3_1"]
    assert res(cands[2])[0].source == TINY


def test_disagreement_kinds():
    assert disagreements(None, True, 1.0, True) == []          # no KernelBench verdict
    assert disagreements(False, True, 0.5, False) == ["correct_here_not_kb", "paid_kb_incorrect"]
    assert disagreements(True, False, 0.0, False) == ["correct_kb_not_here"]
    assert disagreements(True, True, 0.0, True) == ["hack_kb_accepted"]
    assert disagreements(True, True, 1.2, False) == []
    assert disagreements(False, False, 0.0, False) == []


def _score(i: int) -> dict:
    return {"score_id": f"s{i}", "sample_id": f"x{i}", "run_id": "r", "status": "ok"}


def test_store_delete_rewrites_only_the_parts_that_hold_the_keys(tmp_path):
    st = Store(tmp_path)
    a = st.write("scores", [_score(1), _score(2)])
    b = st.write("scores", [_score(3)])
    assert st.delete("scores", ["s2", "nope"]) == 1
    assert sorted(st.keys("scores")) == ["s1", "s3"]
    assert b.exists() and not a.exists()            # the untouched part is left as it was
    assert st.delete("scores", ["s3"]) == 1 and not b.exists()
    assert sorted(st.keys("scores")) == ["s1"] and not st.needs_dedupe("scores")
    # a compaction interrupted earlier keeps its marker (compact clears it), so readers dedupe
    (a_part,) = st.parts("scores")
    (a_part.parent / COMPACTING).touch()
    st.write("scores", [_score(4)])
    st.delete("scores", ["s4"])
    assert st.needs_dedupe("scores") and sorted(st.keys("scores")) == ["s1"]
    assert pq.read_table(a_part).num_rows == 1


def test_jsonl_import_end_to_end_without_duckdb(tmp_path):
    """A JSONL of pure-PyTorch programs through the CLI where duckdb/polars cannot be imported
    (the GPU machine), then queried here."""
    kb = kb_dir(tmp_path / "kb")
    jl = tmp_path / "gens.jsonl"
    jl.write_text("\n".join(json.dumps(r) for r in [
        {"task": "1", "code": PY_GOOD, "model": "m1", "compiled": True, "correctness": False},
        {"task": "1", "code": PY_WRONG, "model": "m2", "compiled": True, "correctness": True},
        {"task": "TinyGelu", "code": TINY}]) + "\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE / "gpu_node"), str(ROOT)])}
    args = [sys.executable, "-m", "mining", "eval", str(jl), "task=kernelbench", f"task.root={kb}",
            f"store.root={tmp_path / 'data'}", "harness.device=cpu", "harness.timed_calls=5",
            f"harness.cache_dir={tmp_path / 'cache'}", "harness.compile_baseline=false"]
    p = subprocess.run(args, capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "absent on the GPU machine" not in p.stderr
    assert f"{jl} jsonl:3: it defines no ModelNew." in p.stderr
    summ = json.loads(p.stdout.split("summary: ", 1)[1].splitlines()[0])
    assert summ["scored"] == 2 and summ["not_evaluated"] == 1 and summ["correct"] == 1
    # pure PyTorch is no custom kernel (a major finding, reward 0): nothing paid, and the wrong
    # program KernelBench accepted is both incorrect here and a hack
    assert summ["disagreements"] == {"correct_here_not_kb": 1, "correct_kb_not_here": 1,
                                     "paid_kb_incorrect": 0, "hack_kb_accepted": 1}
    st = Store(tmp_path / "data")
    imp = {r["producer"]: r for r in st.read("imports").to_pylist()}
    assert imp["m1"]["run_id"] == "import-gens" and imp["m1"]["source_kind"] == "jsonl"
    assert imp["m1"]["task_id"] == "L3_1" and imp["m1"]["kb_correct"] is False


@pytest.mark.parametrize("argv", [["eval", "/no/such/dir/"], ["eval", "a", "b", "c"]])
def test_eval_usage_errors_are_one_sentence(argv):
    p = subprocess.run([sys.executable, "-m", "mining", *argv], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.startswith("error: ") and len(p.stderr.strip().splitlines()) == 1
