"""The trajectory loop wired to the replay backend and scripted harness results (no builds)."""

import asyncio
import json

from agents.backends import make_backend
from agents.coder import Coder
from agents.planner import Planner
from agents.state_machine import Budgets
from agents.trajectory import Agents, run_trajectory
from agents.verifier import Verifier
from mining.tasks import load_suite
from rewards.harness.result import EvalResult

PROG = "```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    V = {v}\n```"


def replay(tmp_path, records):
    p = tmp_path / "r.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in records))
    return make_backend({"backend": "replay", "path": str(p)})


def scripted(results):
    seen = []

    async def evaluate(task, code):
        seen.append(code)
        return results[len(seen) - 1]
    return evaluate, seen


def agents(backend, evaluate, **b):
    budgets = Budgets(**b)
    return Agents(Planner(backend), Coder(backend, "cpu"), Verifier(evaluate, budgets.target_speedup),
                  budgets)


def task():
    return load_suite("level3", ids=["l3_01_mlp"]).tasks[0]


def test_scripted_path_records_every_turn_with_parents(tmp_path):
    plan2 = {"subtasks": [{"title": "a", "ops": ["Linear"]}, {"title": "b", "ops": ["GELU"]}]}
    b = replay(tmp_path, [
        {"role": "planner", "turn": 0, "response": "no json here"},
        {"role": "planner", "turn": 1, "response": json.dumps(plan2)},
        {"role": "coder", "turn": 0, "response": "I cannot."},
        {"role": "coder", "turn": 1, "response": PROG.format(v=1)},
        {"role": "coder", "turn": 2, "response": PROG.format(v=2)},
    ])
    ev, seen = scripted([EvalResult(status="ok", compiled=True, correct=True, speedup=0.5),
                         EvalResult(status="ok", compiled=True, correct=True, speedup=1.5)])
    out = asyncio.run(run_trajectory(task(), agents(b, ev), {"task_id": "l3_01_mlp",
                                                             "trajectory_id": "T"}))
    roles = [(t.role, t.action) for t in out.turns]
    assert roles == [("planner", "plan"), ("coder", "draft"), ("verifier", "verify"),
                     ("coder", "draft"), ("verifier", "verify"), ("coder", "draft"),
                     ("verifier", "verify")]
    assert "retry" in out.turns[0].malformed and not out.plan.fallback
    assert out.turns[1].code is None and out.turns[2].status == "invalid"   # malformed: no harness
    assert len(seen) == 2                                                    # only real code ran
    assert out.turns[5].subtask_index == 1 and out.turns[5].parent == 3      # advanced on top of t3
    assert out.stop_reason == "target_reached" and out.best_turn == 5 and out.best_speedup == 1.5
    rows = [t.row("T", "l3_01_mlp", i) for i, t in enumerate(out.turns)]
    assert rows[2]["parent_turn_id"] == "T/t001" and json.loads(rows[2]["feedback_json"])["decision"]


def test_malformed_plans_twice_fall_back_and_backend_errors_stop(tmp_path):
    b = replay(tmp_path, [{"role": "planner", "response": "still no json"}])
    ev, _ = scripted([])
    out = asyncio.run(run_trajectory(task(), agents(b, ev), {"task_id": "l3_01_mlp",
                                                             "trajectory_id": "T"}))
    assert out.plan.fallback and "fallback" in out.turns[0].malformed
    assert out.stop_reason == "backend_error" and "no answer for role=coder" in out.error
    assert not out.best_correct


def test_revise_gets_previous_code_and_feedback(tmp_path):
    b = replay(tmp_path, [{"role": "planner", "response": json.dumps({"subtasks": ["all"]})},
                          {"role": "coder", "turn": 0, "response": PROG.format(v=1)},
                          {"role": "coder", "response": PROG.format(v=2)}])
    ev, _ = scripted([EvalResult(status="compile_error", error="build failed",
                                 log_tail="main.cpp:3:1: error: expected ';' before '}'"),
                      EvalResult(status="ok", compiled=True, correct=True, speedup=2.0)])
    out = asyncio.run(run_trajectory(task(), agents(b, ev), {"task_id": "l3_01_mlp",
                                                             "trajectory_id": "T"}))
    revise = out.turns[3]
    assert revise.action == "revise" and revise.parent == 1
    prompt = revise.messages[-1]["content"]
    assert "V = 1" in prompt and "main.cpp:3" in prompt and "missing its ';'" in prompt
    assert revise.feedback["given"]["status"] == "compile_error"
    assert out.stop_reason == "target_reached"
