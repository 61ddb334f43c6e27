"""Code and plan extraction from model responses, and compile-error feedback."""

import json

import pytest

from agents.extract import extract_code, extract_json_text
from agents.feedback import make_feedback, parse_compile_errors
from agents.plan import PlanError, parse_plan

PROG = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


def test_fenced_block_is_extracted():
    ex = extract_code(f"Sure.\n\n```python\n{PROG}```\nDone.")
    assert ex.code == PROG and ex.malformed is None


def test_no_code_block_takes_code_from_first_code_line():
    ex = extract_code("The answer follows.\n" + PROG)
    assert ex.code == PROG and any("no code block" in n for n in ex.notes)


def test_no_code_at_all_is_malformed():
    ex = extract_code("I would fuse the GEMM with the GELU.")
    assert ex.code is None and "no code block" in ex.malformed


def test_two_blocks_picks_the_one_defining_modelnew():
    ref = "```python\nclass Model(torch.nn.Module):\n    pass\n```\n"
    other = "```cpp\n__global__ void k() {}\n```\n"
    ex = extract_code(ref + other + f"```python\n{PROG}```\n")
    assert ex.code == PROG


def test_two_modelnew_blocks_takes_the_last():
    first = PROG.replace("return x", "return x + 1")
    ex = extract_code(f"```python\n{first}```\nbetter:\n```python\n{PROG}```")
    assert ex.code == PROG and any("2 code blocks" in n for n in ex.notes)


def test_truncated_response_is_malformed_with_reason():
    ex = extract_code("```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    def f(self):\n        return (1,")
    assert ex.code is None and ex.malformed.startswith("truncated response")


def test_truncated_but_complete_code_is_kept_with_a_note():
    ex = extract_code(f"```python\n{PROG}")
    assert ex.code == PROG and any("not closed" in n for n in ex.notes)


def test_non_utf8_bytes_are_decoded_with_a_note():
    raw = b"\xff\xfe garbage\n```python\n" + PROG.encode() + b"```\n"
    ex = extract_code(raw)
    assert ex.code == PROG and "response was not valid UTF-8" in ex.notes


def test_block_without_modelnew_is_malformed():
    ex = extract_code("```python\nprint('hi')\n```")
    assert ex.code is None and ex.malformed == "no code block defines class ModelNew"


def test_plan_json_inside_prose_and_fence():
    plan = {"subtasks": [{"title": "gemm", "ops": ["Linear"]}], "host_concerns": "syncs"}
    text = "Plan:\n```json\n" + json.dumps(plan) + "\n```\nthanks"
    p = parse_plan(extract_json_text(text))
    assert p.subtasks[0].title == "gemm" and p.host_concerns == ["syncs"]


@pytest.mark.parametrize("text,why", [("not json", "not valid JSON"),
                                      ('{"subtasks": []}', "non-empty"),
                                      ('{"subtasks": [{"ops": []}]}', "no 'title'")])
def test_bad_plans_say_why(text, why):
    with pytest.raises(PlanError, match=why):
        parse_plan(text)


def test_compile_errors_from_gcc_and_nvcc_lines_with_fixes():
    log = ("/tmp/b/main.cpp:6:5: error: expected ‘,’ or ‘;’ before ‘return’\n"
           "kernel.cu(33): error: identifier \"tile\" is undefined\n"
           "kernel.cu(33): error: identifier \"tile\" is undefined\n"
           "ImportError: ext.so: undefined symbol: _Z4gelu\n")
    errs = parse_compile_errors(log)
    assert [(e["file"], e["line"]) for e in errs] == [("main.cpp", 6), ("kernel.cu", 33), (None, None)]
    assert "';'" in errs[0]["fix"] and "declare" in errs[1]["fix"] and "_Z4gelu" in errs[2]["fix"]


def test_incorrect_feedback_locates_output_and_error():
    fb = make_feedback({"status": "incorrect", "error": "output 1 differs from the reference",
                        "max_abs_err": 0.25, "max_rel_err": 0.5})
    assert fb["correctness"]["output"] == 1 and fb["correctness"]["max_abs_err"] == 0.25
    assert "output 1 is wrong" in fb["summary"]


def test_bottleneck_named_from_evidence_kernels():
    fb = make_feedback({"status": "ok", "correct": True, "speedup": 0.8, "runtime_us": 100.0,
                        "evidence": {"kernels": [
                            {"name": "gemm_kernel", "time_us": 80, "calls": 1, "origin": "candidate"},
                            {"name": "gelu_kernel", "time_us": 20, "calls": 1, "origin": "candidate"}],
                            "memcpy": {"h2d_count": 2, "d2h_count": 0}}})
    assert fb["bottleneck"]["top_kernels"][0]["name"] == "gemm_kernel"
    assert any("gemm_kernel takes 80%" in h for h in fb["hints"])
    assert any("host-device copies" in h for h in fb["hints"])
