"""What a fresh candidate worker pays inside the GPU slot, measured piece by piece (GPU only).

    python scripts/probe_slot_costs.py > probe.json

Each case runs in a fresh interpreter, as a candidate worker does: the first torch.profiler
session (CUPTI start-up), a second one, whether a tiny warm-up session beforehand (what a spare
worker could do while it waits) takes that cost out, and how long SIGKILL + reap of a process
holding a CUDA context takes (the slot's drop). Also the launch cost of a tiny kernel before and
after profiling (does CUPTI linger and slow later launches?), with and without TEARDOWN_CUPTI=1.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child(case: str) -> dict:
    sys.path.insert(0, ROOT)
    t = time.perf_counter()
    import torch

    from rewards.harness import sysprof

    out = {"import_s": time.perf_counter() - t}
    t = time.perf_counter()
    torch.cuda.init()
    x = torch.randn(2048, 2048, device="cuda")
    torch.cuda.synchronize()
    out["cuda_first_alloc_s"] = time.perf_counter() - t
    model = torch.nn.Sequential(torch.nn.Linear(2048, 2048), torch.nn.GELU()).cuda().eval()
    if case == "warm":  # the profiler workers' warm-up first: does it take the start-up cost?
        out["warm_profiler_s"] = sysprof.warm_up()
    out["launch_us_before"] = launch_us(torch, x)
    for i in range(2):
        t = time.perf_counter()
        cap = sysprof.capture(model, [x], 3)
        out[f"capture{i}_s"] = time.perf_counter() - t
        out[f"capture{i}_events"] = len(cap["events"])
    out["launch_us_after"] = launch_us(torch, x)  # does CUPTI linger after the sessions?
    out["TEARDOWN_CUPTI"] = os.environ.get("TEARDOWN_CUPTI")
    return out


def launch_us(torch, x) -> float:
    """Median per-launch host+device time of a tiny kernel, 20 rounds of 500 launches."""
    y = x[:16].clone()
    rounds = []
    for _ in range(20):
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(500):
            y.add_(1)
        torch.cuda.synchronize()
        rounds.append((time.perf_counter() - t) / 500 * 1e6)
    return sorted(rounds)[len(rounds) // 2]


def kill_cost() -> dict:
    code = "import torch,sys; x=torch.empty(2**28, device='cuda'); torch.cuda.synchronize(); print('up', flush=True); sys.stdin.read()"
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    p.stdout.readline()
    t = time.perf_counter()
    p.send_signal(signal.SIGKILL)
    p.wait()
    return {"sigkill_reap_s": time.perf_counter() - t}


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2])))
        return
    res = {}
    for case in ("cold", "warm", "teardown"):
        env = {**os.environ, **({"TEARDOWN_CUPTI": "1"} if case == "teardown" else {})}
        r = subprocess.run([sys.executable, __file__, "--child", case], capture_output=True, text=True,
                           timeout=300, env=env)
        res[case] = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {"error": r.stderr[-2000:]}
    res["kill"] = [kill_cost() for _ in range(3)]
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
