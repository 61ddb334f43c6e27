"""The shared precompiled torch/extension.h (harness.build_speed.pch, rewards/harness/pchwarm.py):
made by a process that runs no candidate code, sealed by the orchestrator, read-only to the
sandboxed workers that use it, and discarded when it changed. Real g++, CPU torch, as root (CI)."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest

from mining.tasks import load_file
from rewards.harness import Evaluator, pchwarm

CANDS = Path(__file__).parent / "candidates"
pytestmark = pytest.mark.slow
HONEST = (CANDS / "cpp_multi.py").read_text().replace("ext.BEHAVIOUR", "ext.legit").replace("km_test_multi", "km_test_pch")


def _cfg(cache: Path, **kw) -> dict:
    return {"device": "cpu", "cache_dir": str(cache), "timed_calls": 8, "warmup": 1, "sandbox": "best",
            # C++ candidates only (CPU): no split binding unit, so one flag set: its torch/extension.h PCH
            # and its light one (build_speed.light_pch)
            "build_speed": {"pch": True, "pch_cflags": [[]], "split_launchers": False}, "timeouts_s": {"correctness": 60, "timing": 60}, **kw}


def _wait_prebuild(ev: Evaluator, timeout_s: float = 600) -> dict:
    end = time.monotonic() + timeout_s
    while "ok" not in ev.pch and time.monotonic() < end:
        time.sleep(0.5)
    return ev.pch


def _checked(ev: Evaluator, timeout_s: float = 120) -> dict:
    """The PCH check runs in the background (beside the workers' start-up): its findings once done."""
    assert ev._pch_checked.wait(timeout_s)
    return ev.pch


def _gch(cache: Path) -> list[Path]:
    return sorted((cache / "buildspeed" / "pch").rglob("*.gch"))


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def task():
    return load_file(CANDS / "tiny_task.py")


@pytest.fixture(scope="module")
def made(tmp_path_factory, task):
    """One evaluator: its PCH made in the background and sealed, and an honest C++ candidate
    submitted at once (its build waits for the PCH rather than going without it)."""
    cache = tmp_path_factory.mktemp("pchcache")
    with Evaluator(_cfg(cache)) as ev:
        if not ev._sandbox.guards_cache:
            pytest.skip(f"this machine gives the sandbox only {ev._sandbox.evidence}: the PCH stays off")
        r = ev.submit(task, HONEST).result()
        got = dict(_wait_prebuild(ev))
    return {"cache": cache, "pch": got, "result": r}


def test_the_pch_is_made_sealed_and_used(made):
    assert made["pch"]["mode"] == "use" and made["pch"]["ok"], made["pch"]
    assert made["pch"]["sealed"] >= 2 and len(_gch(made["cache"])) == 2
    r = made["result"]
    assert r.status == "ok", (r.error, r.log_tail)
    assert "light_pch" in r.evidence["fast_build"], r.evidence["fast_build"]  # its light copy compiled on the light one
    assert r.evidence["phases_s"]["pch_wait"] > 0  # submitted while the PCH was being made: it waited


def test_a_candidate_cannot_write_the_pch(made, task):
    """A sandboxed candidate sees the PCH read-only (another uid, a read-only view)."""
    gch = _gch(made["cache"])[0]
    before = _sha(gch)
    probe = f"        open({str(gch)!r}, 'ab').write(b'planted')"
    src = (CANDS / "py_probe.py").read_text().replace("        PROBE", probe)
    with Evaluator(_cfg(made["cache"])) as ev:
        assert ev.pch["mode"] == "use" and not _checked(ev)["discarded"]
        r = ev.submit(task, src).result()
    assert r.status != "ok" and ("Permission" in (r.error or "") or "Read-only" in (r.error or "")), (r.status, r.error)
    assert _sha(gch) == before


def test_a_changed_pch_is_discarded_and_made_again(made, tmp_path):
    """A PCH changed outside the orchestrator (an earlier run without the sandbox, a hand edit) is
    deleted before any worker starts, reported, and made again (the other one is kept)."""
    gch = _gch(made["cache"])[-1]
    gch.write_bytes(gch.read_bytes() + b"planted")
    with Evaluator(_cfg(made["cache"])) as ev:
        found = _checked(ev)["discarded"]
        assert [p["reason"] for p in found] == ["mac_mismatch"] and found[0]["cache"] == "pch", found
        assert any(e["found"] == found for e in ev.cache_watch.events)
        assert _wait_prebuild(ev)["ok"] and ev.pch["sealed"] == 1
    assert gch in _gch(made["cache"]) and len(_gch(made["cache"])) == 2
    assert not gch.read_bytes().endswith(b"planted")
    assert pchwarm.verify(str(made["cache"])) == []


def test_no_build_starts_before_the_check_and_the_start_does_not_wait_for_it(made, task, monkeypatch):
    """pchwarm.verify runs beside the workers' start-up (it hashed ~5.5 GB for 4.2 s of every
    evaluator start, H100): __enter__ returns while it runs, and a candidate submitted meanwhile
    builds only once it has ended."""
    import threading

    release, real = threading.Event(), pchwarm.verify

    def held(*a, **kw):
        assert release.wait(120)
        return real(*a, **kw)

    monkeypatch.setattr(pchwarm, "verify", held)
    with Evaluator(_cfg(made["cache"])) as ev:
        assert not ev._pch_checked.is_set()  # entered, the check still held
        fut = ev.submit(task, HONEST)
        time.sleep(3.0)
        assert not fut.done() and not ev._pch_checked.is_set()
        release.set()
        r = fut.result()
        assert r.status == "ok", (r.error, r.log_tail)
        assert _checked(ev)["discarded"] == [] and ev.pch["verify_s"] >= 3.0
    assert r.evidence["phases_s"]["pch_wait"] >= 3.0  # its build waited for the check


def test_a_check_that_fails_discards_every_pch(made, task, monkeypatch):
    """An error while checking (an unreadable seal folder, a full disk): nothing unchecked is used;
    every PCH is made again."""
    def broken(*a, **kw):
        raise OSError("checking failed")

    real = pchwarm.verify
    monkeypatch.setattr(pchwarm, "verify", broken)
    before = {p: _sha(p) for p in _gch(made["cache"])}
    with Evaluator(_cfg(made["cache"])) as ev:
        found = _checked(ev)["discarded"]
        assert [p["reason"] for p in found] == ["unreadable"] and "checking failed" in found[0]["error"], found
        assert _wait_prebuild(ev)["ok"] and ev.pch["sealed"] == 2, ev.pch  # both made again
    assert set(before) == set(_gch(made["cache"])) and real(str(made["cache"])) == []


def test_without_the_sandbox_the_pch_stays_off(tmp_path):
    with Evaluator(_cfg(tmp_path, sandbox="off")) as ev:
        assert ev.pch["mode"] == "off" and "sandbox" in ev.pch["why"]
    assert not _gch(tmp_path)


def test_pch_config_is_checked():
    from rewards.harness.config import HarnessConfig

    auto = HarnessConfig.from_mapping({})  # auto by default: on for cuda
    assert auto.pch_wanted("cuda") and not auto.pch_wanted("cpu")
    assert not HarnessConfig.from_mapping({"build_speed": {"pch": False}}).pch_wanted("cuda")
    assert HarnessConfig.from_mapping({"build_speed": {"pch": True}}).pch_wanted("cpu")
    with pytest.raises(ValueError, match="pch_cflags"):
        HarnessConfig.from_mapping({"build_speed": {"pch_cflags": ["-O3"]}})
    with pytest.raises(ValueError, match="build_speed.pch"):
        HarnessConfig.from_mapping({"build_speed": {"pch": "yes"}})
    with pytest.raises(ValueError, match="pch_wait_s"):
        HarnessConfig.from_mapping({"build_speed": {"pch_wait_s": -1}})
