"""Reference timings cached on disk per task hash, device, torch version and shapes.

Measured by the reference worker, a process that never loads candidate code, and written by the
orchestrator only, with a MAC (cachemac.py) over the record and its key: a record that fails
verification is not used (the caller re-measures) and is reported in ``problems``.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os

from rewards.harness import cachemac

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


def _root(cache_dir: str | None) -> str:
    return os.path.expanduser(cache_dir or DEFAULT_CACHE)


def load(k: str, cache_dir: str | None = None, key_file: str | None = None,
         problems: list | None = None) -> dict | None:
    """The record stored under ``k`` if its MAC verifies, else None (absent or not trusted: what
    failed is appended to ``problems``, see cachemac.problem)."""
    try:
        with open(os.path.join(_dir(cache_dir), k + ".json"), "rb") as f:
            raw = f.read()
    except OSError:
        return None
    key = cachemac.load_key(_root(cache_dir), key_file)
    try:
        env = json.loads(raw)
        body = env.get("body") if isinstance(env, dict) else None
        if not isinstance(body, str):
            why = "unsigned"
        elif env.get("kid") != cachemac.key_id(key):
            why = "other_key"
        elif not cachemac.verify(key, "baseline", k, body.encode(), env.get("mac")):
            why = cachemac.TAMPER
        else:
            rec = json.loads(body)
            if isinstance(rec, dict):
                return rec
            why = "unreadable"
    except ValueError:
        why = "unreadable"
    if problems is not None:
        problems.append(cachemac.problem("baseline", k, why))
    return None


def store(k: str, record: dict, cache_dir: str | None = None, key_file: str | None = None) -> None:
    """Orchestrator only (it holds the key)."""
    d = _dir(cache_dir)
    os.makedirs(d, exist_ok=True)
    key = cachemac.load_key(_root(cache_dir), key_file)
    body = json.dumps(record)
    env = {"kid": cachemac.key_id(key), "mac": cachemac.mac(key, "baseline", k, body.encode()), "body": body}
    tmp = os.path.join(d, f".{k}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        json.dump(env, f)
    os.replace(tmp, os.path.join(d, k + ".json"))  # atomic: readers never see half a file


def lookup(task_hash: str, cache_dir: str | None = None, key_file: str | None = None) -> dict | None:
    """Newest cached baseline of a task at full size (unshrunk) if any, else the newest at all;
    records whose MAC fails are skipped. ``unverifiable``: the reason when the reference's
    outputs did not depend on its inputs."""
    files = sorted(glob.glob(os.path.join(_dir(cache_dir), f"{task_hash}__*.json")), key=os.path.getmtime)
    recs = [r for r in (load(os.path.basename(f)[:-5], cache_dir, key_file) for f in files) if r]
    full = [r for r in recs if not r.get("overrides")]
    best = (full or recs or [None])[-1]
    if best is None:
        return None
    return {k: best.get(k) for k in ("ref_runtime_us", "ref_compile_runtime_us", "device", "gpu", "unverifiable")}
