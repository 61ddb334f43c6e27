"""pchwarm.verify hashes the sealed PCH folders side by side: the same verdicts as one at a time."""

from __future__ import annotations

import os

import pytest

from rewards.harness import cachemac, pchwarm


@pytest.mark.parametrize("workers", [1, None])
def test_a_changed_folder_among_several_is_the_one_found_and_deleted(tmp_path, workers):
    cache = str(tmp_path)
    for i in range(5):
        d = os.path.join(pchwarm.pch_root(cache), f"set{i}")
        os.makedirs(d)
        with open(os.path.join(d, "km_torch_extension.h.gch"), "wb") as f:
            f.write(os.urandom(1 << 16))
    assert pchwarm.seal(cache) == 5
    assert pchwarm.verify(cache, workers=workers) == []  # nothing changed: nothing found, nothing deleted
    with open(os.path.join(pchwarm.pch_root(cache), "set3", "km_torch_extension.h.gch"), "ab") as f:
        f.write(b"planted")
    os.makedirs(os.path.join(pchwarm.pch_root(cache), "unsigned"))  # never sealed
    found = pchwarm.verify(cache, workers=workers)
    assert sorted((p["key"], p["reason"]) for p in found) == [("set3", cachemac.TAMPER), ("unsigned", "unsigned")]
    assert sorted(os.listdir(pchwarm.pch_root(cache))) == ["set0", "set1", "set2", "set4"]


def test_a_cache_made_with_the_light_pch_serves_a_run_without_it(tmp_path, monkeypatch):
    """A flag set whose PCHs were made with the light one beside the full one is made before for
    a run with ``light_pch`` off (no builder started); not the other way round."""
    import json
    import subprocess

    cache = str(tmp_path)
    os.makedirs(os.path.join(pchwarm.pch_root(cache), "some"))
    flags = pchwarm.flag_sets({"split_launchers": False}, [[]])
    index = os.path.join(cache, "seals", "pch", "made.json")
    os.makedirs(os.path.dirname(index))
    started = []

    def no_builder(*a, **k):  # a builder would be started: recorded, and refused
        started.append(a)
        raise OSError("no builder in this test")

    monkeypatch.setattr(subprocess, "Popen", no_builder)
    with open(index, "w") as f:
        json.dump([pchwarm._index_key(x, True) for x in flags], f)
    off = {"split_launchers": False, "light_pch": False}
    assert pchwarm.prebuild(cache, off, [[]]).get("skipped") == "made before" and not started
    with open(index, "w") as f:
        json.dump([pchwarm._index_key(x, False) for x in flags], f)
    assert not pchwarm.prebuild(cache, {"split_launchers": False}, [[]])["ok"] and len(started) == 1  # the light one is missing
