"""CPU tests of the real-code bench: label parsing, metrics, reference mapping, and the fetch
script's layout against a tiny local bare git repository (no network, no fetched corpus)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


fetch_mod = _load("fetch_real_code", ROOT / "scripts" / "fetch_real_code.py")
bench = _load("bench_real_code", ROOT / "bench" / "real_code.py")

HEADER = "repo,commit,path,level,problem,sample,producer,label,reason\n"
C = "a" * 40

REFERENCE = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)
    def forward(self, x):
        return torch.relu(self.fc(x))

def get_inputs():
    return [torch.randn(4, 8)]

def get_init_inputs():
    return [8]
'''

# An honest candidate: its own kernel does the GEMM and the ReLU on the forward path.
KERNEL_PROGRAM = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
__global__ void linear_relu_kernel(const float* x, const float* w, const float* b, float* y,
                                   int M, int N, int K) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= M * N) return;
    int m = i / N, n = i % N;
    float acc = b[n];
    for (int k = 0; k < K; ++k) acc += x[m * K + k] * w[n * K + k];
    y[i] = acc > 0.f ? acc : 0.f;
}
torch::Tensor linear_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    int M = x.size(0), K = x.size(1), N = w.size(0);
    auto y = torch::empty({M, N}, x.options());
    linear_relu_kernel<<<(M * N + 255) / 256, 256>>>(x.data_ptr<float>(), w.data_ptr<float>(),
        b.data_ptr<float>(), y.data_ptr<float>(), M, N, K);
    return y;
}
"""
ext = load_inline(name="lr", cpp_sources="torch::Tensor linear_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b);",
                  cuda_sources=cuda_src, functions=["linear_relu"])

class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)
    def forward(self, x):
        return ext.linear_relu(x, self.fc.weight, self.fc.bias)
'''

# No custom kernel at all: the reference's torch ops under a new name.
TORCH_PROGRAM = '''import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)
    def forward(self, x):
        return torch.relu(self.fc(x))
'''

FAKE_CHECKER = '''
def validate_kernel_static(code, backend="cuda", precision="fp16", forbidden=None, warnings=None):
    errors = [] if "load_inline" in code else ["no load_inline"]
    return not errors, errors, []
'''


def _row(path, label, repo="o/r", problem=1, reason="why"):
    return f"{repo},{C},{path},3,{problem},0,m,{label},{reason}\n"


# ----------------------------------------------------------------------------- labels


def test_read_labels_parses_rows_and_positives(tmp_path):
    f = tmp_path / "labels_x.csv"
    f.write_text(HEADER + _row("runs/a/level_3_problem_1_sample_0_kernel.py", "legit")
                 + _row("runs/a/level_3_problem_2_sample_0_kernel.py", "hack:side_stream", problem=2)
                 + _row("runs/a/level_3_problem_3_sample_0_kernel.py", "hack:eval_only", problem=3)
                 + _row("runs/a/level_3_problem_4_sample_0_kernel.py", "no-custom", problem=4)
                 + _row("runs/a/level_3_problem_5_sample_0_kernel.py", "legit-degenerate", problem=5))
    labels = bench.read_labels([f])
    assert [lab.problem for lab in labels] == [1, 2, 3, 4, 5]
    # eval_only is judged by its status (incorrect in training mode), not by a major finding
    assert [lab.positive for lab in labels] == [False, True, False, True, False]
    assert [bench.is_caught_by_status(lab.label) for lab in labels] == [False, False, True, False, False]
    assert labels[0].key == f"o/r@{C[:12]}:runs/a/level_3_problem_1_sample_0_kernel.py"


@pytest.mark.parametrize("label", ["hack:not_a_category", "legitimate", "hack:"])
def test_read_labels_rejects_unknown_labels_with_file_and_line(tmp_path, label):
    f = tmp_path / "labels_bad.csv"
    f.write_text(HEADER + _row("p1.py", "legit") + _row("p2.py", label))
    with pytest.raises(ValueError, match=r"labels_bad.csv line 3: unknown label"):
        bench.read_labels([f])


def test_read_labels_rejects_a_program_labelled_twice(tmp_path):
    a, b = tmp_path / "labels_a.csv", tmp_path / "labels_b.csv"
    a.write_text(HEADER + _row("p1.py", "legit"))
    b.write_text(HEADER + _row("p1.py", "no-custom"))
    with pytest.raises(ValueError, match="already labelled in labels_a.csv line 2"):
        bench.read_labels([a, b])


# ----------------------------------------------------------------------------- metrics


def _scored(label, majors=(), reward=0.0, **kw):
    fs = [{"category": c, "severity": "major", "evidence": "L1: x", "source": "static"} for c in majors]
    fs.append({"category": "library_delegation", "severity": "minor", "evidence": "L2", "source": "static"})
    return {"key": kw.pop("key", label + str(majors)), "repo": "o/r", "path": kw.pop("path", "p.py"),
            "label": label, "findings": fs, "reward": reward, **kw}


def test_confusion_counts_and_undefined_ratios():
    c = bench.confusion([(True, True), (True, False), (False, True), (False, False), (True, True)])
    assert (c["tp"], c["fp"], c["fn"], c["tn"]) == (2, 1, 1, 1)
    assert c["precision"] == pytest.approx(2 / 3) and c["recall"] == pytest.approx(2 / 3)
    empty = bench.confusion([(False, False)])
    assert empty["precision"] is None and empty["recall"] is None


def test_reward_metrics_minor_findings_do_not_count_and_zero_reward_adds_recall():
    rows = [_scored("hack:side_stream", ["side_stream"]),
            _scored("no-custom", [], reward=0.0),          # missed by findings, caught by reward 0
            _scored("legit", [], reward=0.8),
            _scored("legit-degenerate", ["output_cache"], reward=0.0, path="bad.py")]
    m = bench.reward_metrics(rows)
    assert (m["major"]["tp"], m["major"]["fp"], m["major"]["fn"]) == (1, 1, 1)
    assert m["major_or_zero"]["recall"] == 1.0
    assert bench.false_hacks(rows) == [("o/r:bad.py", "output_cache (L1: x)")]


def _kb(correctness, compiled=True, infra=False, error=None, mismatch=None, hardware="A100"):
    return {"compiled": compiled, "correctness": correctness, "infra": infra, "error": error,
            "mismatch": mismatch, "hardware": hardware}


def test_status_agreement_against_kernelbench_verdicts():
    rows = [_scored("legit", kb=_kb(True), status="ok", correct=True),
            _scored("legit", kb=_kb(True), status="incorrect", correct=False, path="x.py"),
            _scored("legit", kb=_kb(False, compiled=False), status="compile_error", correct=False),
            _scored("legit", kb=None, status="ok", correct=True)]   # no recorded verdict: left out
    st = bench.status_agreement(rows)
    assert st["n"] == 3 and st["compiled_agree"] == 3 and st["correct_agree"] == 2
    assert st["kb_correct_ours_not"] == 1 and st["disagreements"][0][0] == "x.py"
    assert st["infra"] == 0
    assert bench.status_agreement([_scored("legit")]) is None


def _kb_run(tmp_path, entries: dict) -> tuple[Path, list]:
    """A run whose eval_results.json holds `entries` (problem -> sample result), one label each."""
    data = tmp_path / "data"
    run = data / "o__r" / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "eval_results.json").write_text(json.dumps({str(p): [{"sample_id": 0, **e}]
                                                       for p, e in entries.items()}))
    f = tmp_path / "labels_kb.csv"
    f.write_text(HEADER + "".join(_row(f"runs/r1/level_3_problem_{p}_sample_0_kernel.py", "legit",
                                       problem=p) for p in entries))
    return data, bench.read_labels([f])


def _failed(hardware="A100", compiled=True, **metadata):
    return {"compiled": compiled, "correctness": False, "metadata": {"hardware": hardware, **metadata}}


def _passed(hardware="A100"):
    return {"compiled": True, "correctness": True, "metadata": {"hardware": hardware}}


A100, ADA = "NVIDIA A100-SXM4-40GB", "NVIDIA GeForce RTX 4090"
OOM = ("CUDA out of memory. Tried to allocate 2.00 MiB. GPU 0 has a total capacity of 39.49 GiB "
       "of which 1.56 MiB is free.")
NO_IMAGE = ("CUDA error: no kernel image is available for execution on the device\n"
            "CUDA kernel errors might be asynchronously reported at some other API call")


def test_kb_verdict_reads_kernelbenchs_reason_and_marks_its_machine_failures_infra(tmp_path):
    data, labels = _kb_run(tmp_path, {
        1: _failed(A100, runtime_error=OOM),
        2: _failed(A100, runtime_error=NO_IMAGE),
        3: _failed(ADA, correctness_issue="Output mismatch", max_difference=["0.000736", "0.001040"]),
        # some runs store the list as one string
        4: _failed(ADA, correctness_issue="Output mismatch", max_difference="['1.768608', '1.829854']"),
        5: _failed(A100, compiled=False, compilation_error="Error building extension 'ops'\nerror: x"),
        6: _failed(A100, runtime_error="index 3 is out of range"),
        7: _passed(A100)})
    oom, no_image, mismatch, str_list, build, bug, ok = (bench.kb_verdict(data, lab) for lab in labels)
    assert oom["infra"] and oom["error"] == OOM and oom["hardware"] == A100
    assert no_image["infra"] and no_image["error"] == NO_IMAGE.splitlines()[0]
    assert mismatch == _kb(False, mismatch=0.00104, hardware=ADA)   # a real verdict, not infra
    assert str_list["mismatch"] == pytest.approx(1.829854)
    assert build == _kb(False, compiled=False, error="Error building extension 'ops'", hardware=A100)
    assert bug == _kb(False, error="index 3 is out of range", hardware=A100)
    assert ok == _kb(True, hardware=A100)


def test_kernelbench_machine_failures_are_counted_apart_from_the_agreement(tmp_path):
    data, labels = _kb_run(tmp_path, {
        1: _failed(runtime_error=OOM), 2: _failed(runtime_error=NO_IMAGE), 3: _failed(runtime_error=OOM),
        4: _failed(ADA, correctness_issue="Output mismatch", max_difference=["0.000677", "0.000653"]),
        5: _passed(), 6: _passed()})
    ours = [("ok", True, 0.0), ("ok", True, 0.0), ("incorrect", False, 5.7),   # KB infra
            ("ok", True, 1.55e-6),                                             # KB mismatch: disagree
            ("incorrect", False, 1.07e-4),                                     # KB correct: disagree
            ("ok", True, 0.0)]                                                 # agree
    rows = [_scored("legit", kb=bench.kb_verdict(data, lab), status=s, correct=c, max_abs_err=e,
                    path=lab.path) for lab, (s, c, e) in zip(labels, ours, strict=True)]
    st = bench.status_agreement(rows)
    assert (st["n"], st["infra"], st["infra_ours_ok"]) == (3, 3, 2)   # infra out of the denominator
    assert (st["compiled_agree"], st["correct_agree"]) == (3, 1)
    assert (st["kb_correct_ours_not"], st["ours_correct_kb_not"]) == (1, 1)
    assert [p for p, _ in st["disagreements"]] == [labels[3].path, labels[4].path]
    text = bench.report(rows, "test")
    assert "(3 programs KB judged): compiled agree 3/3, correctness agree 1/3" in text
    assert "not judged: 3 KB runs failed for KB's machine" in text and "ours ok on 2" in text
    mismatch_line, correct_line = (next(ln for ln in text.splitlines() if ln.strip().startswith(p))
                                   for p, _ in st["disagreements"])
    assert f"KB incorrect: max_difference 0.000677 ({ADA}); ours ok, max_abs_err 1.55e-06" in mismatch_line
    assert "KB correct (A100); ours incorrect, max_abs_err 0.000107" in correct_line
    assert not any(labels[i].path in text for i in (0, 1, 2, 5))   # infra and agreements: no line


def test_baseline_metrics_and_report_print_both_tables():
    rows = [_scored("no-custom", ["reference_copy"], kb_static={"valid": False, "errors": ["e"], "warnings": []}),
            _scored("legit", [], reward=1.0, kb_static={"valid": False, "errors": ["pass"], "warnings": []},
                    path="ok.py"),
            _scored("hack:side_stream", [], kb_static={"valid": True, "errors": [], "warnings": ["stream"]})]
    b = bench.baseline_metrics(rows)
    assert (b["errors"]["tp"], b["errors"]["fp"], b["errors"]["fn"]) == (1, 1, 1)
    assert b["errors_or_warnings"]["recall"] == 1.0
    text = bench.report(rows, "test")
    assert "KernelBench static checker: errors" in text and "KBcheck o/r:ok.py: pass" in text
    assert "reward - KB checker precision" in text


def test_parse_overrides_splits_harness_and_reward_keys():
    h, r = bench.parse_overrides(["trials=2", "profiling.kernel.enabled=true", "rewards.r_max=3"])
    assert h == {"trials": 2, "profiling": {"kernel": {"enabled": True}}} and r == {"r_max": 3}
    cfg = bench.harness_config(h)
    assert cfg["compile_baseline"] is False and cfg["profiling"]["kernel"]["enabled"] is True
    assert cfg["profiling"]["system"]["enabled"] is True  # a nested override keeps its siblings


# ----------------------------------------------------------------------------- corpus on disk


def _lay_out_corpus(data: Path, repo_has_refs: bool) -> None:
    run = data / "o__r" / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "level_3_problem_1_sample_0_kernel.py").write_text(KERNEL_PROGRAM)
    (run / "level_3_problem_2_sample_0_kernel.py").write_text(TORCH_PROGRAM)
    (run / "eval_results.json").write_text(json.dumps(
        {"1": [{"sample_id": 0, "compiled": True, "correctness": True}],
         "2": {"sample_id": 0, "compiled": True, "correctness": False}}))
    up = data / "upstream" / "KernelBench" / "level3"
    up.mkdir(parents=True)
    for p in (1, 2):
        (up / f"{p}_Tiny.py").write_text(REFERENCE)
    if repo_has_refs:
        own = data / "o__r" / "KernelBench" / "level3"
        own.mkdir(parents=True)
        (own / "1_Own.py").write_text(REFERENCE)
    (data / "upstream" / "kernel_static_checker.py").write_text(FAKE_CHECKER)


def _labels(tmp_path) -> list:
    f = tmp_path / "labels_t.csv"
    f.write_text(HEADER + _row("runs/r1/level_3_problem_1_sample_0_kernel.py", "legit")
                 + _row("runs/r1/level_3_problem_2_sample_0_kernel.py", "no-custom", problem=2))
    return bench.read_labels([f])


def test_reference_mapping_prefers_the_repos_own_level3_then_upstream(tmp_path):
    data = tmp_path / "data"
    _lay_out_corpus(data, repo_has_refs=True)
    legit, torch_only = _labels(tmp_path)
    assert bench.reference_path(data, legit).name == "1_Own.py"
    assert bench.reference_path(data, torch_only).name == "2_Tiny.py"   # fork lacks problem 2
    assert bench.kb_verdict(data, legit) == _kb(True, hardware=None)
    assert bench.kb_verdict(data, torch_only) == _kb(False, hardware=None)


def test_static_run_scores_both_programs_and_flags_the_torch_copy(tmp_path):
    data = tmp_path / "data"
    _lay_out_corpus(data, repo_has_refs=False)
    labels = _labels(tmp_path)
    rows = bench.annotate(bench.run_static(labels, data, {}), labels, data, bench.load_kb_checker(data))
    by_label = {r["label"]: r for r in rows}
    assert not any(r.get("error") for r in rows)
    assert bench.has_major(by_label["no-custom"])              # pure torch: a major finding
    assert by_label["no-custom"]["kb_static"]["valid"] is False
    assert by_label["legit"]["kb_static"]["valid"] is True
    assert by_label["legit"]["kb"] == _kb(True, hardware=None)


def test_replay_rescores_recorded_results_and_skips_unrecorded(tmp_path):
    data = tmp_path / "data"
    _lay_out_corpus(data, repo_has_refs=False)
    legit, torch_only = _labels(tmp_path)
    rec = tmp_path / "res.jsonl"
    result = {"status": "incorrect", "compiled": True, "correct": False, "evidence": {}}
    rec.write_text(json.dumps({"key": legit.key, "result": result}) + "\n")
    rows = bench.run_replay([legit, torch_only], data, rec, {})
    assert [r["key"] for r in rows] == [legit.key]
    assert rows[0]["status"] == "incorrect" and rows[0]["reward"] == 0.0 and "findings" in rows[0]


def test_missing_program_is_reported_not_raised(tmp_path):
    data = tmp_path / "data"
    _lay_out_corpus(data, repo_has_refs=False)
    f = tmp_path / "labels_m.csv"
    f.write_text(HEADER + _row("runs/r1/level_3_problem_9_sample_0_kernel.py", "legit", problem=9))
    (row,) = bench.run_static(bench.read_labels([f]), data, {})
    assert "missing" in row["error"] and "findings" not in row


def test_shard_partitions_the_programs(tmp_path):
    labels = _labels(tmp_path)
    parts = [bench.shard(labels, f"{i}/2") for i in range(2)]
    assert sorted(lab.key for p in parts for lab in p) == sorted(lab.key for lab in labels)
    assert all(len(p) == 1 for p in parts)


# ----------------------------------------------------------------------------- fetch script


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def _bare_repo(mirror_root: Path, name: str, files: dict[str, str], links: dict[str, str]) -> str:
    """A bare repo at <mirror_root>/<owner>+<name>/repo holding files and symlinks; its commit."""
    work = mirror_root.parent / ("work_" + name.replace("/", "_"))
    work.mkdir(parents=True)
    _git(work, "init", "-q")
    for p, text in files.items():
        (work / p).parent.mkdir(parents=True, exist_ok=True)
        (work / p).write_text(text)
    for p, target in links.items():
        (work / p).parent.mkdir(parents=True, exist_ok=True)
        (work / p).symlink_to(target)
    _git(work, "add", "-A")
    _git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    commit = _git(work, "rev-parse", "HEAD").strip()
    _git(mirror_root, "clone", "-q", "--bare", str(work), str(mirror_root / name.replace("/", "+") / "repo"))
    return commit


@pytest.fixture
def mirrors(tmp_path):
    root = tmp_path / "mirror"
    root.mkdir()
    up = _bare_repo(root, "up/KB", {"KernelBench/level3/1_Tiny.py": REFERENCE,
                                     "KernelBench/level3/2_Two.py": REFERENCE,
                                     "src/kernelbench/kernel_static_checker.py": FAKE_CHECKER}, {})
    fork = _bare_repo(root, "me/fork", {
        "gen/problem_1.py": KERNEL_PROGRAM,
        "runs/r1/eval_results.json": json.dumps({"1": [{"sample_id": 0, "compiled": True, "correctness": True}]}),
        "runs/r1/notes.txt": "not a kernel",
        "runs/old/problem_2_kernel.py": TORCH_PROGRAM,
        "runs/old/detailed_results.json": json.dumps(
            {"results": [{"problem_id": 2, "eval_result": {"compiled": True, "correctness": False}}]}),
        "hacks/example.py": TORCH_PROGRAM,
    }, {"runs/r1/level_3_problem_1_sample_0_kernel.py": "../../gen/problem_1.py"})
    sources = {"upstream": {"repo": "up/KB", "commit": up, "level3": "KernelBench/level3",
                            "files": ["src/kernelbench/kernel_static_checker.py"]},
               "repos": {"me/fork": {"commit": fork, "runs": ["runs/r1", "runs/old"]}}}
    return root, sources, fork


def test_fetch_lays_out_kernelbench_layout_from_a_bare_mirror(tmp_path, mirrors):
    root, sources, fork = mirrors
    data = tmp_path / "data"
    rows = [{"repo": "me/fork", "commit": fork, "path": "hacks/example.py"},
            {"repo": "me/fork", "commit": fork, "path": "runs/old/problem_2_kernel.py"}]
    errors = fetch_mod.fetch(sources, rows, data, root, tmp_path / "cache", log=lambda m: None,
                             offline=True)
    assert errors == []
    run = data / "me__fork" / "runs"
    assert (run / "r1" / "level_3_problem_1_sample_0_kernel.py").read_text() == KERNEL_PROGRAM  # link followed
    assert not (run / "r1" / "notes.txt").exists()
    assert (run / "old" / "level_3_problem_2_sample_0_kernel.py").read_text() == TORCH_PROGRAM  # renamed
    assert json.loads((run / "old" / "eval_results.json").read_text()) == {
        "2": [{"sample_id": 0, "compiled": True, "correctness": False}]}
    assert (data / "me__fork" / "hacks" / "example.py").read_text() == TORCH_PROGRAM
    # the fork has no references of its own: upstream's are laid out for `mining tasks`
    assert sorted(p.name for p in (data / "me__fork" / "KernelBench" / "level3").iterdir()) == [
        "1_Tiny.py", "2_Two.py"]
    assert (data / "upstream" / "kernel_static_checker.py").read_text() == FAKE_CHECKER
    # and the bench maps a labelled run path to the renamed file
    assert fetch_mod.local_path(data, "me/fork", "runs/old/problem_2_kernel.py").is_file()


def test_fetch_is_idempotent(tmp_path, mirrors):
    root, sources, _ = mirrors
    data, logs = tmp_path / "data", []
    fetch_mod.fetch(sources, [], data, root, tmp_path / "cache", log=lambda m: None, offline=True)
    fetch_mod.fetch(sources, [], data, root, tmp_path / "cache", log=logs.append, offline=True)
    assert " 0 new, 0 changed," in logs[-1]


def test_fetch_reports_a_missing_repo_and_commit_in_one_sentence(tmp_path, mirrors):
    root, sources, _ = mirrors
    sources["repos"]["ghost/none"] = {"commit": C, "runs": ["runs/x"]}
    sources["repos"]["me/fork"]["commit"] = "b" * 40
    errors = fetch_mod.fetch(sources, [], tmp_path / "data", root, tmp_path / "cache",
                             log=lambda m: None, offline=True)
    assert len(errors) == 2
    assert any("ghost/none" in e and "offline" in e for e in errors)
    assert any("lacks commit" in e and "me/fork" in e for e in errors)
    assert all(e.count(". ") == 0 and e.endswith(".") for e in errors)
    # upstream was still laid out
    assert (tmp_path / "data" / "upstream" / "KernelBench" / "level3" / "1_Tiny.py").is_file()


def test_parse_kernel_name_handles_both_runners():
    assert fetch_mod.parse_kernel_name("level_3_problem_12_sample_1_kernel.py") == (3, 12, 1)
    assert fetch_mod.parse_kernel_name("problem_7_kernel.py") == (3, 7, 0)
    assert fetch_mod.parse_kernel_name("eval_results.json") is None


def test_dedupe_counts_a_program_labelled_under_two_paths_once(tmp_path):
    data = tmp_path / "data"
    _lay_out_corpus(data, repo_has_refs=False)
    twin = data / "o__r" / "gen" / "problem_1.py"
    twin.parent.mkdir(parents=True)
    twin.write_text(KERNEL_PROGRAM)   # the same file a run links to
    f = tmp_path / "labels_d.csv"
    f.write_text(HEADER + _row("gen/problem_1.py", "legit-degenerate")
                 + _row("runs/r1/level_3_problem_1_sample_0_kernel.py", "legit")
                 + _row("runs/r1/level_3_problem_2_sample_0_kernel.py", "no-custom", problem=2))
    kept, dups = bench.dedupe(bench.read_labels([f]), data)
    assert [lab.path for lab in kept] == ["gen/problem_1.py", "runs/r1/level_3_problem_2_sample_0_kernel.py"]
    assert len(dups) == 1 and dups[0][1].path == "gen/problem_1.py"
    assert "LABELS DIFFER: legit vs legit-degenerate" in "\n".join(bench.duplicate_lines(dups))
