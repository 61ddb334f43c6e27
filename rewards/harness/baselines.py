"""Reference timings cached on disk per task hash, device, torch version and shapes.

Measured by the reference worker, a process that never loads candidate code.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os

DEFAULT_CACHE = os.environ.get("KERNELMINE_CACHE", "~/.cache/kernelmine")


def _dir(cache_dir: str | None) -> str:
    return os.path.join(os.path.expanduser(cache_dir or DEFAULT_CACHE), "baselines")


# bump when the timing protocol changes, so baselines timed the old way are not reused
# (2: per-call planned buffers and scaled inputs)
PROTOCOL = 2


def key(task_hash: str, device_name: str, torch_version: str, overrides: dict, calls: int,
        variant: dict | None = None) -> str:
    """``variant``: harness settings the reference's timing depends on (model mode, TF32)."""
    material = [overrides, calls, PROTOCOL] + ([variant] if variant else [])
    shape = hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:12]
    safe = lambda s: "".join(c if c.isalnum() or c in ".-" else "_" for c in s)  # noqa: E731
    return f"{task_hash}__{safe(device_name)}__{safe(torch_version)}__{shape}"


def load(k: str, cache_dir: str | None = None) -> dict | None:
    try:
        with open(os.path.join(_dir(cache_dir), k + ".json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def store(k: str, record: dict, cache_dir: str | None = None) -> None:
    d = _dir(cache_dir)
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, f".{k}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        json.dump(record, f)
    os.replace(tmp, os.path.join(d, k + ".json"))  # atomic: readers never see half a file


def lookup(task_hash: str, cache_dir: str | None = None) -> dict | None:
    """Newest cached baseline of a task at full size (unshrunk) if any, else the newest at all.
    ``unverifiable``: the reason when the reference's outputs did not depend on its inputs."""
    files = sorted(glob.glob(os.path.join(_dir(cache_dir), f"{task_hash}__*.json")), key=os.path.getmtime)
    recs = [r for r in (load(os.path.basename(f)[:-5], cache_dir) for f in files) if r]
    full = [r for r in recs if not r.get("overrides")]
    best = (full or recs or [None])[-1]
    if best is None:
        return None
    return {k: best.get(k) for k in ("ref_runtime_us", "ref_compile_runtime_us", "device", "gpu", "unverifiable")}
