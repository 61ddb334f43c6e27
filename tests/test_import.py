"""`python -m mining eval <KernelBench run dir>`: score existing generations into the store.

One small KernelBench-layout run (C++ candidates built once, shared through the build cache) is
imported once per module; the tests read what it left in the store, resume it, force it, query
the disagreements with KernelBench's recorded verdicts and build the report.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mining.ingest.verdicts import KINDS
from mining.store import Store

HERE = Path(__file__).resolve().parent
TINY = (HERE / "candidates" / "tiny_task.py").read_text()
BROKEN = (HERE / "candidates" / "cpp_compile_error.py").read_text()

# One C++ source for every candidate below (one content-hashed build): a hand-written linear +
# GELU, or + ReLU (wrong) when `relu` is set.
KERNEL = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <cmath>
torch::Tensor lin_act(torch::Tensor x, torch::Tensor w, torch::Tensor b, bool relu) {
    auto xc = x.contiguous();
    int64_t M = xc.size(0), K = xc.size(1), N = w.size(0);
    auto y = torch::empty({M, N}, xc.options());
    const float* X = xc.data_ptr<float>(); const float* W = w.data_ptr<float>();
    const float* B = b.data_ptr<float>(); float* Y = y.data_ptr<float>();
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            float a = B[j];
            for (int64_t k = 0; k < K; ++k) a += X[i * K + k] * W[j * K + k];
            Y[i * N + j] = relu ? (a > 0.f ? a : 0.f) : 0.5f * a * (1.f + std::erf(a * 0.70710678f));
        }
    return y;
}
"""
ext = load_inline(name="km_import_lin_act", cpp_sources=CPP, functions=["lin_act"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return ext.lin_act(x, self.fc.weight, self.fc.bias, RELU)
'''
LEGIT = KERNEL.replace("RELU", "False")
WRONG = KERNEL.replace("RELU", "True")
# A hack: the "kernel" delegates to torch's own addmm and gelu (reference_copy, a major finding).
ATEN = (KERNEL.replace("km_import_lin_act", "km_import_aten")
        .replace(KERNEL[KERNEL.index("torch::Tensor lin_act"):KERNEL.index('"""\next')],
                 "torch::Tensor lin_act(torch::Tensor x, torch::Tensor w, torch::Tensor b, bool r) {\n"
                 "    return torch::gelu(torch::addmm(b, x, w.t()));\n}\n")
        .replace("RELU", "False"))
NO_MODELNEW = LEGIT.replace("class ModelNew(", "class Faster(")

PROGRAMS = {
    "level_3_problem_1_sample_0_kernel.py": LEGIT,
    "level_3_problem_1_sample_1_kernel.py": WRONG,
    "level_3_problem_1_sample_2_kernel.py": NO_MODELNEW,
    "level_3_problem_1_sample_3_kernel.py": ATEN,
    "level_3_problem_2_sample_0_kernel.py": BROKEN,
    "level_3_problem_99_sample_0_kernel.py": LEGIT,
}


def _kb(compiled, correct, runtime=-1.0, sample=0):
    return {"sample_id": sample, "compiled": compiled, "correctness": correct,
            "metadata": {"hardware": "NVIDIA H100", "device": "cuda:0"},
            "runtime": runtime, "runtime_stats": {}}


# KernelBench's recorded verdicts, chosen to disagree with the truth in known ways: the legit
# program (correct here) was judged incorrect there; the wrong one was judged correct there;
# the ATen delegate (a major hack here) was accepted there.
EVAL_RESULTS = {
    "1": [_kb(True, False, sample=0), _kb(True, True, 2.5, sample=1),
          _kb(False, False, sample=2), _kb(True, True, 1.0, sample=3)],
    "2": [_kb(False, False)],
    "99": [_kb(True, True, 3.0)],
}


def make_source(root: Path) -> tuple[Path, Path]:
    """(KernelBench checkout with two tiny Level 3 references, run directory)."""
    level = root / "KernelBench" / "level3"
    level.mkdir(parents=True)
    (level / "1_TinyGelu.py").write_text(TINY)
    (level / "2_TinyGeluSmall.py").write_text(TINY.replace("BATCH = 8", "BATCH = 4"))
    run = root / "runs" / "tiny_run"
    run.mkdir(parents=True)
    for name, src in PROGRAMS.items():
        (run / name).write_text(src)
    (run / "eval_results.json").write_text(json.dumps(EVAL_RESULTS))
    (run / "generation_config.yaml").write_text("model_name: test/model-x\nlevel: 3\n")
    return root, run


def mining(*args, timeout=900):
    return subprocess.run([sys.executable, "-m", "mining", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "COLUMNS": "200"})


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    root = tmp_path_factory.mktemp("kb")
    kb, run = make_source(root)
    common = ["task=kernelbench", f"task.root={kb}", f"store.root={root / 'data'}",
              "harness.device=cpu", f"harness.cache_dir={root / 'cache'}",
              "harness.timed_calls=5", "harness.compile_baseline=false", "harness.profile=false",
              "store.ingest.batch_size=2"]
    # a first call cut short (limit) is a crash's twin: the rest is scored by the next call
    first = mining("eval", str(run), *common, "store.ingest.limit=2")
    assert first.returncode == 0, first.stderr[-3000:]
    p = mining("eval", str(run), *common)
    assert p.returncode == 0, p.stderr[-3000:]
    return {"root": root, "run": run, "common": common, "first": first, "second": p,
            "store": Store(root / "data")}


def _summary(p) -> dict:
    [line] = [ln for ln in p.stdout.splitlines() if ln.startswith("summary: ")]
    return json.loads(line[len("summary: "):])


def test_rows_provenance_and_kernelbench_verdicts(imported):
    st = imported["store"]
    imp = {r["source_key"]: r for r in st.read("imports").to_pylist()}
    assert set(imp) == set(PROGRAMS)
    smp = {r["sample_id"]: r for r in st.read("samples").to_pylist()}
    sc = {r["sample_id"]: r for r in st.read("scores").to_pylist()}
    assert len(smp) == len(sc) == 4
    for key, r in imp.items():
        assert r["run_id"] == "import-tiny_run" and r["source_run"] == "tiny_run"
        assert r["producer"] == r["policy"] == "test/model-x" and r["source_kind"] == "kernelbench_run"
        assert r["source_path"] == str(imported["run"] / key) and r["level"] == 3
        assert r["kb_hardware"] == "NVIDIA H100" and r["schema_version"] == 3
    legit = imp["level_3_problem_1_sample_0_kernel.py"]
    assert (legit["problem_id"], legit["sample_index"], legit["task_id"]) == (1, 0, "L3_1")
    assert legit["kb_correct"] is False and legit["kb_runtime_ms"] is None and legit["error"] is None
    assert imp["level_3_problem_1_sample_1_kernel.py"]["kb_runtime_ms"] == 2.5
    # bad input: one sentence each, no sample, no score
    assert imp["level_3_problem_1_sample_2_kernel.py"]["error"] == "it defines no ModelNew"
    unknown = imp["level_3_problem_99_sample_0_kernel.py"]
    assert unknown["task_id"] is None and "unknown task id: level 3 problem 99" in unknown["error"]
    for r in (imp["level_3_problem_1_sample_2_kernel.py"], unknown):
        assert r["sample_id"] not in smp and r["sample_id"] not in sc
    for key in ("level_3_problem_1_sample_2_kernel.py", "level_3_problem_99_sample_0_kernel.py"):
        [line] = [ln for ln in imported["second"].stderr.splitlines() if key in ln]
        assert line.startswith("eval: ") and line.endswith(".") and "Traceback" not in line
    # this toolkit's verdicts, with harness and reward versions
    by_key = {k: sc.get(r["sample_id"]) for k, r in imp.items()}
    assert by_key["level_3_problem_1_sample_0_kernel.py"]["correct"] is True
    assert by_key["level_3_problem_1_sample_0_kernel.py"]["reward"] > 0
    assert by_key["level_3_problem_1_sample_1_kernel.py"]["correct"] is False
    assert by_key["level_3_problem_2_sample_0_kernel.py"]["status"] == "compile_error"
    assert by_key["level_3_problem_1_sample_3_kernel.py"]["major_hack"] is True
    for s in sc.values():
        assert s["harness_version"] and s["reward_version"] and s["scorer_version"].startswith("h")
        assert s["run_id"] == "import-tiny_run" and s["policy"] == "test/model-x"
        assert smp[s["sample_id"]]["messages_json"] and smp[s["sample_id"]]["skill"] == 1


def test_partial_run_then_resume_then_nothing_left(imported):
    assert "4 evaluable, 0 already scored" in imported["first"].stdout
    assert "2 to score" in imported["first"].stdout
    assert "2 already scored" in imported["second"].stdout and "2 to score" in imported["second"].stdout
    st = imported["store"]
    parts = st.parts("scores")
    p = mining("eval", str(imported["run"]), *imported["common"])
    assert p.returncode == 0, p.stderr[-2000:]
    assert "0 to score" in p.stdout
    assert st.parts("scores") == parts and st.read("imports").num_rows == len(PROGRAMS)
    assert st.read("samples").num_rows == 4


def test_disagreement_query_and_summary_agree(imported):
    p = mining("query", "disagreements", "--json", f"store.root={imported['root'] / 'data'}")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    got = {(r["kind"], r["problem_id"], r["sample_index"]) for r in rows}
    assert got == {("correct_here_not_kb", 1, 0), ("paid_kb_incorrect", 1, 0),
                   ("correct_kb_not_here", 1, 1), ("hack_kb_accepted", 1, 3)}
    p = mining("query", "disagreement_counts", "--json", f"store.root={imported['root'] / 'data'}")
    [counts] = json.loads(p.stdout)
    summ = _summary(imported["second"])
    assert counts["n_both"] == summ["with_kb_verdict"] == 4
    assert {k: counts[k] for k in KINDS} == summ["disagreements"]
    assert summ["not_evaluated"] == 2 and summ["scored"] == 4 and summ["evaluated_now"] == 2


def test_force_rescores_without_duplicates(imported):
    st = imported["store"]
    before = {r["score_id"]: r["scored_at"] for r in st.read("scores").to_pylist()}
    p = mining("eval", str(imported["run"]), "--force", *imported["common"])
    assert p.returncode == 0, p.stderr[-2000:]
    assert "4 earlier" in p.stdout and "4 to score" in p.stdout
    after = {r["score_id"]: r["scored_at"] for r in st.read("scores", dedupe=False).to_pylist()}
    assert set(after) == set(before) and len(st.read("scores", dedupe=False)) == 4
    assert all(after[k] > before[k] for k in before)


def test_report_shows_the_imported_run(imported):
    from mining.report import build

    page = build(imported["root"] / "data").read_text()
    assert "Imported runs" in page and "test/model-x" in page
    for kind in KINDS:
        assert kind in page
    assert "compile_error" in page and "L3_1" in page
    assert (imported["root"] / "data" / "report" / "import_speedup.png").is_file()
