"""Caches are written by the orchestrator and verified on use (issue 16).

Unit tests drive the MAC layer directly (no compiler); the harness tests run the real harness
on CPU: a candidate that rewrites the cached baselines, and a build entry replaced by another
candidate's ``.so``. Each attack is followed by an honest candidate whose result must not
move, and each has a legitimate twin (an untouched cache is reused, nothing is reported).
"""

import concurrent.futures as cf
import hashlib
import json
import os
import shutil
import stat
import threading
import time
from pathlib import Path

import pytest

from mining.tasks import load_file
from rewards import dynamic
from rewards.harness import Evaluator, baselines, buildcache, cacheguard, cachemac, cachewatch

CANDS = Path(__file__).parent / "candidates"


# -- the MAC layer ----------------------------------------------------------------------------
def test_key_file_is_private_and_stable(tmp_path):
    k = cachemac.load_key(str(tmp_path))
    p = Path(cachemac.key_path(str(tmp_path)))
    assert len(k) == cachemac.KEY_BYTES and p.read_bytes() == k
    assert stat.S_IMODE(p.stat().st_mode) == 0o600 and stat.S_IMODE(p.parent.stat().st_mode) == 0o700
    other = tmp_path / "elsewhere" / "k"
    assert cachemac.load_key(str(tmp_path), str(other)) != k and other.exists()
    short = tmp_path / "short.key"
    short.write_bytes(b"x" * 8)  # a planted guessable key is refused, not used
    with pytest.raises(ValueError, match="shorter"):
        cachemac.load_key(str(tmp_path), str(short))


def _forge(path: Path, **changes) -> None:
    """What a candidate can do without the key: edit the record, keep (or recompute a plain
    hash as) the MAC."""
    env = json.loads(path.read_text())
    body = json.loads(env["body"])
    body.update(changes)
    env["body"] = json.dumps(body)
    path.write_text(json.dumps(env))


def test_baseline_round_trip_and_every_forgery_is_refused(tmp_path):
    c = str(tmp_path)
    rec = {"ref_runtime_us": 100.0, "overrides": {}, "unverifiable": None}
    baselines.store("t1__cpu__x__a", rec, c)
    baselines.store("t2__cpu__x__a", {**rec, "ref_runtime_us": 5000.0}, c)
    probs: list = []
    assert baselines.load("t1__cpu__x__a", c, problems=probs) == rec and probs == []  # legit twin
    d = tmp_path / "baselines"
    f1 = d / "t1__cpu__x__a.json"

    _forge(f1, ref_runtime_us=100000.0)  # a faster-looking candidate: a slower reference
    assert baselines.load("t1__cpu__x__a", c, problems=probs) is None
    assert probs == [cachemac.problem("baseline", "t1__cpu__x__a", cachemac.TAMPER)]
    assert baselines.lookup("t1", c) is None  # lookup skips it too

    (d / "t2__cpu__x__a.json").replace(f1)  # another task's valid record under this key
    probs.clear()
    assert baselines.load("t1__cpu__x__a", c, problems=probs) is None and probs[0]["reason"] == cachemac.TAMPER

    f1.write_text(json.dumps(rec))  # the old unsigned format: not trusted, not called tampering
    probs.clear()
    assert baselines.load("t1__cpu__x__a", c, problems=probs) is None and probs[0]["reason"] == "unsigned"

    baselines.store("t1__cpu__x__a", rec, c, key_file=str(tmp_path / "k2"))  # signed under another key
    probs.clear()
    assert baselines.load("t1__cpu__x__a", c, problems=probs) is None and probs[0]["reason"] == "other_key"


def _entry(root: Path, key: str, so: bytes, state: str = "built") -> Path:
    d = root / "ext" / key
    d.mkdir(parents=True)
    (d / "km_x.so").write_bytes(so)
    (d / "main.cpp").write_text("int f();")
    (d / (buildcache.MARKER if state == "built" else buildcache.FAILED)).write_text("")
    return d


KA, KB = "a" * 32, "b" * 32


def test_build_seal_detects_flipped_bytes_swapped_so_and_copied_seals(tmp_path):
    assert (cacheguard.MARKER, cacheguard.FAILED) == (buildcache.MARKER, buildcache.FAILED)
    s = cacheguard.BuildSeals(str(tmp_path))
    a, b = _entry(tmp_path, KA, b"\x7fELF-A" * 100), _entry(tmp_path, KB, b"\x7fELF-B" * 100)
    assert s.after_build([{"key": KA, "compiled": True}, {"key": KB, "compiled": True}]) == []
    assert s.check(KA) is None and s.check(KB) is None  # legit twin: sealed and unchanged
    assert s.before_load([{"key": KA}]) == [] and (a / "km_x.so").exists()  # reused, not discarded

    raw = bytearray((a / "km_x.so").read_bytes())
    raw[10] ^= 0xFF
    (a / "km_x.so").write_bytes(bytes(raw))
    assert s.check(KA) == cachemac.TAMPER

    (a / "km_x.so").write_bytes((b / "km_x.so").read_bytes())  # another candidate's .so
    assert s.check(KA) == cachemac.TAMPER
    seals = tmp_path / "seals" / "ext"
    (seals / f"{KA}.json").write_bytes((seals / f"{KB}.json").read_bytes())  # and its seal
    assert s.check(KA) == cachemac.TAMPER
    (seals / f"{KA}.json").unlink()
    assert s.check(KA) == "unsealed"

    assert s.before_load([{"key": KA}]) == [cachemac.problem("build", KA, "unsealed")]
    assert not a.exists() and not list((tmp_path / "ext").glob(".discarded-*"))  # gone, not loadable
    assert s.check(KB) is None


def _build_in_flight(s: cacheguard.BuildSeals, entries: list[dict], delay_s: float) -> cf.Future:
    """A build job that has compiled (its folder finished, its lock released) and reports after
    ``delay_s``: the orchestrator seals ``entries`` then. The future holds that seal's problems."""
    entered = threading.Event()

    def job():
        with s.building():
            entered.set()
            time.sleep(delay_s)
            return s.after_build(entries)

    fut = cf.ThreadPoolExecutor(1).submit(job)
    assert entered.wait(10)
    return fut


def test_a_fresh_build_not_yet_sealed_is_waited_for_not_discarded(tmp_path):
    """CI, session 22: two candidates of one source; the cache hit reported before the compile
    did, and its check before the load discarded the fresh build as a plant (then a build in the
    same folder failed). Unsealed while a build is in flight: wait for its seal, then check."""
    s = cacheguard.BuildSeals(str(tmp_path), settle_timeout_s=60)
    a = _entry(tmp_path, KA, b"\x7fELF-fresh" * 50)  # the compile finished; the worker has not reported
    sealed = _build_in_flight(s, [{"key": KA, "compiled": True}], delay_s=0.5)
    t0 = time.monotonic()
    assert s.before_load([{"key": KA}]) == []  # the hit's check: waits for the seal
    assert time.monotonic() - t0 >= 0.4 and (a / "km_x.so").exists() and s.check(KA) is None
    assert sealed.result(10) == []


def test_a_plant_is_discarded_once_the_builds_in_flight_are_sealed(tmp_path):
    s = cacheguard.BuildSeals(str(tmp_path), settle_timeout_s=60)
    planted = _entry(tmp_path, KA, b"evil" * 50)
    t0 = time.monotonic()
    assert s.before_load([{"key": KA}]) == [cachemac.problem("build", KA, "unsealed")]
    assert time.monotonic() - t0 < 5 and not planted.exists()  # nothing in flight: no wait
    planted = _entry(tmp_path, KA, b"evil" * 50)
    _entry(tmp_path, KB, b"\x7fELF-B" * 50)
    sealed = _build_in_flight(s, [{"key": KB, "compiled": True}], delay_s=0.3)  # a build of another key
    assert s.before_load([{"key": KA}]) == [cachemac.problem("build", KA, "unsealed")]
    assert not planted.exists() and s.check(KB) is None
    assert sealed.result(10) == []
    # a build that never reports does not hold a check past the settle limit
    s.settle_timeout_s = 0.2
    planted = _entry(tmp_path, KA, b"evil" * 50)
    with s.building():
        t0 = time.monotonic()
        assert s.before_load([{"key": KA}]) == [cachemac.problem("build", KA, "unsealed")]
        assert time.monotonic() - t0 < 5 and not planted.exists()


def test_a_claimed_compile_cannot_reseal_a_finished_build(tmp_path):
    s = cacheguard.BuildSeals(str(tmp_path))
    a = _entry(tmp_path, KA, b"good" * 50)
    assert s.after_build([{"key": KA, "compiled": True}]) == []
    (a / "km_x.so").write_bytes(b"evil" * 50)  # planted, then "I compiled KA" from a worker
    assert s.after_build([{"key": KA, "compiled": True}]) == [cachemac.problem("build", KA, cachemac.TAMPER)]
    assert not a.exists()
    # a recorded failure may be compiled again (a retry that succeeds is re-sealed as built)
    f = _entry(tmp_path, KB, b"", state="failed")
    assert s.after_build([{"key": KB, "compiled": True}]) == [] and s.check(KB) is None
    (f / buildcache.FAILED).unlink()
    (f / "km_x.so").write_bytes(b"built now")
    (f / buildcache.MARKER).write_text("")
    assert s.after_build([{"key": KB, "compiled": True}]) == [] and s.check(KB) is None


def test_a_source_remembers_its_entries_and_they_are_checked_before_its_next_build(tmp_path):
    s = cacheguard.BuildSeals(str(tmp_path))
    a = _entry(tmp_path, KA, b"good" * 50)
    s.after_build([{"key": KA, "compiled": True}])
    s.remember("src A", [{"key": KA, "compiled": True}])
    assert s.known("src A") == [{"key": KA, "compiled": False}] and s.known("src B") == []
    assert s.before_load(s.known("src A")) == [] and a.exists()  # legit: kept for the worker's cache hit
    (a / "km_x.so").write_bytes(b"evil" * 50)
    assert s.before_load(s.known("src A")) == [cachemac.problem("build", KA, cachemac.TAMPER)] and not a.exists()
    (p,) = (tmp_path / "seals" / "src").glob("*.json")
    rec = json.loads(p.read_text())
    rec["body"] = json.dumps([{"key": KB}])  # a planted list is ignored
    p.write_text(json.dumps(rec))
    assert s.known("src A") == []


def test_watch_ties_a_change_to_the_only_candidate_running_and_repairs_it(tmp_path):
    c = str(tmp_path)
    seals = cacheguard.BuildSeals(c)
    w = cachewatch.Watch(seals, c)
    rec = {"ref_runtime_us": 7.0}
    baselines.store("t__cpu", rec, c)
    w.baseline("t__cpu", rec)
    a = _entry(tmp_path, KA, b"good" * 50)
    seals.after_build([{"key": KA, "compiled": True}])
    alone, ev = object(), {}
    w.begin(alone)
    w.end(alone, ev)  # legit twin: nothing moved, nothing said
    assert ev == {} and w.events == []

    w.begin(alone)
    _forge(tmp_path / "baselines" / "t__cpu.json", ref_runtime_us=7000.0)
    (a / "km_x.so").write_bytes(b"evil" * 50)
    w.end(alone, ev)
    assert sorted(p["cache"] for p in ev["cache_tamper_attributed"]) == ["baseline", "build"]
    assert baselines.load("t__cpu", c) == rec and not a.exists()  # repaired from our copy; discarded
    assert [f.category for f in dynamic.from_evidence(ev)] == ["file_tamper"]

    x, y, evx = object(), object(), {}  # two candidates ran: nobody is blamed, the log says so
    w.begin(x)
    w.begin(y)
    _forge(tmp_path / "baselines" / "t__cpu.json", ref_runtime_us=1.0)
    w.end(x, evx)
    assert evx == {} and w.events[-1]["attributed"] is False and w.events[-1]["suspects"] == 2
    assert baselines.load("t__cpu", c) == rec


def test_worker_reports_are_sanitised():
    rows = cacheguard.entries_of({"entries": [{"key": "../../etc"}, {"key": KA}, {"key": KA, "compiled": True},
                                              "junk", {"key": "A" * 32}]})
    assert rows == [{"key": KA, "compiled": True}]
    assert cacheguard.entries_of({"entries": "nope"}) == [] and cacheguard.entries_of({}) == []


def test_a_planted_output_in_an_unfinished_build_folder_is_cleared(tmp_path):
    d = tmp_path / "k"
    (d / "sub").mkdir(parents=True)
    for n in ("km_x.so", ".km_build_lock", "lock"):
        (d / n).write_text("x")
    buildcache._clear(str(d))
    assert sorted(os.listdir(d)) == [".km_build_lock"]


# -- the real harness (CPU) ---------------------------------------------------------------------
def _cfg(cache: Path) -> dict:
    return {"device": "cpu", "cache_dir": str(cache), "timed_calls": 12, "warmup": 2,
            "timeouts_s": {"correctness": 60, "timing": 60}}


def _probe(code: str) -> str:
    return (CANDS / "py_probe.py").read_text().replace("        PROBE", "        " + code)


HONEST = _probe("pass")
# the attack as a candidate would write it: at import, every cached baseline gets a reference
# 1000x slower (the MAC kept as it was), found through the build cache's environment variable
REWRITE = '''
import glob, json, os
for _p in glob.glob(os.path.join(os.path.dirname(os.environ["TORCH_EXTENSIONS_DIR"]), "baselines", "*.json")):
    try:
        _e = json.load(open(_p)); _b = json.loads(_e["body"]); _b["ref_runtime_us"] *= 1000
        _e["body"] = json.dumps(_b); open(_p, "w").write(json.dumps(_e))
    except Exception:
        pass
''' + HONEST


def _digests(d: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.glob("*.json"))}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_rewritten_baselines_are_remeasured_and_the_writer_is_found(tmp_path):
    task = load_file(CANDS / "tiny_task.py")
    with Evaluator(_cfg(tmp_path)) as ev:
        first = ev.submit(task, HONEST).result()
    assert first.status == "ok", (first.error, first.log_tail)
    assert "cache_tampered" not in first.evidence and ev.task_timings[0]["cache_tampered"] == []
    before = _digests(tmp_path / "baselines")

    with Evaluator(_cfg(tmp_path)) as ev:  # legit twin: the untouched record is reused as is
        reuse = ev.submit(task, HONEST).result()
    assert reuse.ref_runtime_us == first.ref_runtime_us and "cache_tampered" not in reuse.evidence
    assert _digests(tmp_path / "baselines") == before and ev.cache_watch.events == []

    # between runs, a file write the way a candidate would make it: verified on use, measured again
    (f,) = (tmp_path / "baselines").glob("*.json")
    _forge(f, ref_runtime_us=first.ref_runtime_us * 1000)
    with Evaluator(_cfg(tmp_path)) as ev:
        honest = ev.submit(task, HONEST).result()
    assert honest.status == "ok", (honest.error, honest.log_tail)
    assert honest.ref_runtime_us < first.ref_runtime_us * 50  # measured again, not the forged 1000x
    assert honest.speedup == pytest.approx(honest.ref_runtime_us / honest.runtime_us) and honest.speedup < 20
    assert honest.evidence["cache_tampered"] == [cachemac.problem("baseline", f.stem, cachemac.TAMPER)]
    assert ev.task_timings[0]["cache_tampered"] == honest.evidence["cache_tampered"]
    assert "cache_tamper_attributed" not in honest.evidence  # nobody of this run did it
    assert not [x for x in dynamic.from_evidence(honest.evidence) if x.category == "file_tamper"]

    # during a run, by a candidate (at import): repaired when it finishes, and tied to it
    with Evaluator(_cfg(tmp_path)) as ev:
        clean = ev.submit(task, HONEST).result()
        before = _digests(tmp_path / "baselines")
        attacker = ev.submit(task, REWRITE).result()
        changed = _digests(tmp_path / "baselines") != before  # False where the sandbox stopped the write
        after = ev.submit(task, HONEST).result()
    assert clean.status == attacker.status == after.status == "ok", (attacker.error, attacker.log_tail)
    assert "cache_tamper_attributed" not in clean.evidence and "cache_tamper_attributed" not in after.evidence
    cats = [x.category for x in dynamic.from_evidence(attacker.evidence)]
    if changed or attacker.evidence.get("cache_tamper_attributed"):
        assert [p["reason"] for p in attacker.evidence["cache_tamper_attributed"]] == [cachemac.TAMPER]
        assert "file_tamper" in cats and ev.cache_watch.events[0]["attributed"]
    else:
        assert "file_tamper" not in cats
    assert after.ref_runtime_us == clean.ref_runtime_us == honest.ref_runtime_us
    with Evaluator(_cfg(tmp_path)) as ev:  # the record was repaired from the orchestrator's copy
        later = ev.submit(task, HONEST).result()
    assert later.ref_runtime_us == honest.ref_runtime_us and "cache_tampered" not in later.evidence


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_reference_outputs_are_never_written_to_disk(tmp_path):
    task = load_file(CANDS / "tiny_task.py")
    with Evaluator(_cfg(tmp_path)) as ev:
        r = ev.submit(task, HONEST).result()
        assert r.status == "ok", (r.error, r.log_tail)
        ctx = next(iter(ev._ctx.values())).future.result()
        needles = [o.contiguous().numpy().tobytes()[:64] for _, outs in ctx["trials"] for o in outs]
        needles += [o.contiguous().numpy().tobytes()[:64] for _, _, outs in ctx["spot"] for o in outs]
        files = [p for p in tmp_path.rglob("*") if p.is_file() and not p.is_symlink()]  # live workers' scratch too
        assert any("scratch" in str(p) for p in files)
        for p in files:
            data = p.read_bytes()
            assert not any(n in data for n in needles), f"reference outputs found in {p}"


# -- build artefacts, one real g++ build shared by the tests below ------------------------------
def _multi(behaviour: str) -> str:
    return (CANDS / "cpp_multi.py").read_text().replace("ext.BEHAVIOUR", "ext." + behaviour)


LEGIT = _multi("legit")
# the same extension name with `legit` computing relu: another candidate's .so, loadable in its place
OTHER = LEGIT.replace("return at::gelu(at::addmm(b, x, w.t())); }", "return at::relu(at::addmm(b, x, w.t())); }", 1)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    if shutil.which("g++") is None and shutil.which("c++") is None:
        pytest.skip("no C++ compiler")
    cache = tmp_path_factory.mktemp("kmcache")
    task = load_file(CANDS / "tiny_task.py")
    with Evaluator(_cfg(cache)) as ev:
        first = ev.submit(task, LEGIT).result()
        other = ev.build(OTHER)
    assert OTHER != LEGIT and first.status == "ok" and other.compiled, (first.error, other.error)
    return cache, task, first


def _so(cache: Path, key: str) -> Path:
    return next((cache / "ext" / key).glob("*.so"))


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_untampered_build_is_reused_without_a_compile(built):
    cache, task, first = built
    with Evaluator(_cfg(cache)) as ev:
        again = ev.submit(task, LEGIT).result()
    assert again.status == "ok" and again.cache_hit is True and again.evidence["build_compiles"] == 0
    assert again.evidence["slot_builds"] == 0 and "cache_tampered" not in again.evidence
    assert [e["key"] for e in again.evidence["cache_entries"]] == [e["key"] for e in first.evidence["cache_entries"]]


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_so_swapped_for_another_candidates_is_rebuilt_not_loaded(built):
    cache, task, first = built
    key = first.evidence["cache_entries"][0]["key"]
    others = [p for p in (cache / "ext").iterdir() if p.name not in (key, "lock") and not p.name.startswith(".")]
    theirs = next(p for p in others if list(p.glob("*.so")))
    mine = _so(cache, key)
    mine.write_bytes(next(theirs.glob("*.so")).read_bytes())  # the attacker's file write
    with Evaluator(_cfg(cache)) as ev:
        honest = ev.submit(task, LEGIT).result()
    # loaded, the relu .so would make it incorrect; rebuilt, it is correct
    assert honest.status == "ok" and honest.correct, (honest.error, honest.log_tail)
    assert honest.evidence["cache_tampered"] == [cachemac.problem("build", key, cachemac.TAMPER)]
    assert honest.evidence["build_compiles"] >= 1  # the build pool compiled it again
    assert _so(cache, key).read_bytes() != next(theirs.glob("*.so")).read_bytes()
    assert cacheguard.BuildSeals(str(cache)).check(key) is None  # the rebuild is sealed
    with Evaluator(_cfg(cache)) as ev:  # and reused silently afterwards
        later = ev.submit(task, LEGIT).result()
    assert later.cache_hit is True and "cache_tampered" not in later.evidence and later.status == "ok"
