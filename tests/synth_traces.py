"""Synthetic profiler traces for what the GPU capture does not contain (tests/test_profiling.py).

The captured fixtures (tests/fixtures/profiles/) have no host copy, no synchronisation, no
host-bound forward and no spilling kernel; these builders make small ones. They follow the trace
layout of torch.profiler's chrome export (kernel <-> runtime call by correlation id, ops and module
ranges on the host thread) and ncu's ``--csv --page raw --print-units base`` layout (header row,
units row, one row per launch).
"""

from __future__ import annotations

import csv
import io


class Trace:
    def __init__(self):
        self.ev, self.t, self.g, self.corr = [], 0.0, 0.0, 0

    def rng(self, cat, name, dur, **kw):
        e = {"cat": cat, "name": name, "ts": self.t, "dur": dur, "tid": 1, **kw}
        self.ev.append(e)
        return e

    def launch(self, kernel, gpu_us, host_us=6.0):
        self.corr += 1
        self.rng("cuda_runtime", "cudaLaunchKernel", host_us, corr=self.corr)
        self.g = max(self.g, self.t) + 1.5
        self.ev.append({"cat": "kernel", "name": kernel, "ts": self.g, "dur": gpu_us, "tid": 7, "stream": 7,
                        "corr": self.corr})
        self.g += gpu_us
        self.t += host_us + 1


def forward(tr: Trace, layers, h2d_bytes: int = 0):
    tr.launch("spin_kernel", 1000.0)  # torch.cuda._sleep marker (excluded from the summary)
    start, n0 = tr.t, len(tr.ev)
    tr.t += 2
    for mod, _typ, op, dims, types, kernel, gpu_us in layers:
        m0 = tr.t
        tr.t += 3
        o0 = tr.t
        tr.t += 4
        if kernel:
            tr.launch(kernel, gpu_us)
        if op:  # a raw <<<>>> launch from extension code has no aten op around it
            tr.ev.append({"cat": "cpu_op", "name": op, "ts": o0, "dur": tr.t - o0 + 1, "tid": 1, "dims": dims,
                          "types": types})
        tr.t += 2
        if mod:
            tr.ev.append({"cat": "user_annotation", "name": f"km::module::{mod}", "ts": m0, "dur": tr.t - m0, "tid": 1})
        tr.t += 2
    if h2d_bytes:
        tr.corr += 1
        tr.rng("cuda_runtime", "cudaMemcpyAsync", 8.0, corr=tr.corr)
        tr.ev.append({"cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "ts": tr.g + 30, "dur": 20.0,
                      "tid": 7, "stream": 7, "corr": tr.corr, "bytes": h2d_bytes})
        tr.t += 9
        tr.rng("cuda_runtime", "cudaStreamSynchronize", 25.0)
        tr.t += 26
    tr.ev.insert(n0, {"cat": "user_annotation", "name": "km::forward", "ts": start, "dur": tr.t - start, "tid": 1})
    tr.t = max(tr.t, tr.g) + 50


def ncu_csv(rows):
    metrics = ["gpu__time_duration.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
               "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
               "sm__throughput.avg.pct_of_peak_sustained_elapsed", "sm__warps_active.avg.pct_of_peak_sustained_active",
               "launch__registers_per_thread", "dram__bytes_read.sum", "dram__bytes_write.sum",
               "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum", "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum",
               "sm__sass_thread_inst_executed_op_ffma_pred_on.sum"]
    units = ["nsecond", "%", "%", "%", "%", "register/thread", "byte", "byte", "byte", "byte", "inst"]
    head = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
            "Grid Size", "Device", "CC"]
    buf = io.StringIO()
    buf.write("==PROF== Connected to process 4242 (/usr/bin/python3.12)\n")
    w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(head + metrics)
    w.writerow([""] * len(head) + units)
    for i, (name, vals) in enumerate(rows):
        w.writerow([i, 4242, "python3.12", "127.0.0.1", name, 1, 7, "(256, 1, 1)", "(65536, 1, 1)", 0, "9.0"]
                   + [f"{v:,}" if isinstance(v, int) else v for v in vals])
    buf.write("==PROF== Disconnected from process 4242\n")
    return buf.getvalue()
