"""Can Nsight Systems produce a report here? Probe once per process; fall back to torch.profiler.

On the project's H200 machine nsys records but ``nsys stats`` cannot export a report, so the
system-level profile comes from torch.profiler; this probe records why, for the profile record.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
import tempfile


@functools.cache
def probe(timeout_s: float = 30.0) -> dict:
    nsys = shutil.which("nsys")
    if nsys is None:
        return {"available": False, "reason": "nsys not found"}
    with tempfile.TemporaryDirectory(prefix="km-nsys-") as d:
        try:
            rec = subprocess.run([nsys, "profile", "--trace=cuda", "--sample=none", "--cpuctxsw=none",
                                  "--force-overwrite=true", "-o", f"{d}/probe", sys.executable, "-c", "pass"],
                                 capture_output=True, text=True, timeout=timeout_s)
            if rec.returncode != 0:
                return {"available": False, "reason": "nsys profile failed: " + _last(rec.stderr)}
            st = subprocess.run([nsys, "stats", "--report", "cuda_gpu_kern_sum", "--format", "csv",
                                 f"{d}/probe.nsys-rep"], capture_output=True, text=True, timeout=timeout_s)
        except (subprocess.TimeoutExpired, OSError) as e:
            return {"available": False, "reason": f"nsys probe failed ({type(e).__name__})"}
    if st.returncode != 0 or "ERROR" in st.stderr.upper():
        return {"available": False, "reason": "nsys stats cannot make a report: " + _last(st.stderr or st.stdout)}
    return {"available": True, "reason": "nsys stats works"}


def _last(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "no message"
