"""`mining run` killed mid-run and run again with the same run_id: every trajectory is stored
exactly once and nothing is lost.

Real parts: the `mining run` subprocess, the replay backend, the harness with its worker
processes. Kept fast for CI (about a minute on 2 cores): one small task, two trajectories,
pure-PyTorch candidates (no compiler: the harness's build path is tested elsewhere), a
replayed model delay so the kill lands inside the second trajectory, tight timeouts.
The kill takes the whole process tree, harness workers included (they run in sessions of
their own, so a process-group kill alone would leave them running, as a crash would not).
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mining.store import Store

ROOT = Path(__file__).resolve().parent.parent
PLAN = json.dumps({"subtasks": [{"title": "whole MLP", "ops": ["Linear", "GELU"],
                                 "description": "GEMM + bias + GELU layers, then a projection"}],
                   "fusion_boundaries": [], "layout_contracts": [], "host_concerns": []})
MLP = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, hidden, depth, out_features):
        super().__init__()
        layers, width = [], in_features
        for _ in range(depth):
            layers += [nn.Linear(width, hidden), nn.{act}()]
            width = hidden
        layers.append(nn.Linear(width, out_features))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)
"""


def fence(code: str) -> str:
    return f"Here is the program.\n\n```python\n{code}```\n"


def replay_file(tmp: Path) -> Path:
    """Planner: a plan, then a replan. Coder: a syntax error, a wrong activation, then correct."""
    recs = [{"role": "planner", "response": PLAN},
            {"role": "coder", "turn": 0, "response": fence(MLP.replace("nn.Module):", "nn.Module)")),
             "delay_s": 1.0},
            {"role": "coder", "turn": 1, "response": fence(MLP.format(act="ReLU")), "delay_s": 1.0},
            {"role": "coder", "response": fence(MLP.format(act="GELU")), "delay_s": 1.0}]
    path = tmp / "replay.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def args(tmp: Path) -> list[str]:
    return [sys.executable, "-m", "mining", "run", "+task=level3", "task.ids=[l3_01_mlp]",
            "model=replay", f"model.path={tmp / 'replay.jsonl'}", "harness.device=cpu",
            f"store.root={tmp / 'data'}", f"harness.cache_dir={tmp / 'cache'}",
            "harness.timed_calls=3", "harness.warmup=1", "harness.trials=1", "harness.input_sets=3",
            "harness.compile_baseline=false", "harness.spot_checks=1",
            *(f"harness.timeouts_s.{k}=60" for k in ("build", "correctness", "timing", "baseline", "start")),
            "agents.samples_per_task=2", "agents.concurrency=1", "agents.target_speedup=0.0",
            "run_id=resume-test"]


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from /proc), children first found first."""
    kids: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid``'s process group and the process group of every descendant."""
    groups = {os.getpgid(p) for p in [pid, *descendants(pid)] if _exists(p)}
    for g in groups:
        try:
            os.killpg(g, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _exists(pid: int) -> bool:
    try:
        os.getpgid(pid)
        return True
    except ProcessLookupError:
        return False


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to find the worker processes")
def test_kill_and_resume_has_no_duplicates_and_loses_nothing(tmp_path):
    replay_file(tmp_path)
    store = Store(tmp_path / "data")
    p = subprocess.Popen(args(tmp_path), cwd=ROOT, start_new_session=True,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 300
    try:
        while not store.parts("trajectories"):
            assert p.poll() is None, p.stdout.read()
            assert time.monotonic() < deadline, "no trajectory stored in time"
            time.sleep(0.1)
        workers = descendants(p.pid)
    finally:
        kill_tree(p.pid)
        p.wait()
    assert workers, "the run should have harness workers to kill"
    time.sleep(0.2)
    assert not [w for w in workers if _exists(w) and Path(f"/proc/{w}/stat").read_text().split()[2] != "Z"]
    first = store.read("trajectories").column("trajectory_id").to_pylist()
    assert first == ["resume-test:l3_01_mlp:s0"], "the kill should land inside the second trajectory"

    done = subprocess.run(args(tmp_path), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "already done: 1" in done.stderr

    trajs = store.read("trajectories", dedupe=False).to_pylist()
    ids = [t["trajectory_id"] for t in trajs]
    assert sorted(ids) == [f"resume-test:l3_01_mlp:s{i}" for i in range(2)]  # none lost, no dupes
    assert len({t["seed"] for t in trajs}) == 2
    turns = store.read("turns", dedupe=False).to_pylist()
    turn_ids = [t["turn_id"] for t in turns]
    assert len(turn_ids) == len(set(turn_ids))        # the killed trajectory left no turns behind
    for t in trajs:
        mine = sorted((x for x in turns if x["trajectory_id"] == t["trajectory_id"]),
                      key=lambda x: x["turn_index"])
        assert len(mine) == t["n_turns"] and t["stop_reason"] == "target_reached"
        assert {x["run_id"] for x in mine} == {"resume-test"} and all(x["task_hash"] for x in mine)
        # the scripted path: unparsable code, wrong output, replan, correct
        assert [x["status"] for x in mine if x["role"] == "verifier"] == ["invalid", "incorrect", "ok"]
        assert [x["action"] for x in mine if x["role"] == "planner"] == ["plan", "replan"]
        assert t["best_correct"] and "GELU" in t["best_code"]
    assert len(store.read("runs")) == 1
