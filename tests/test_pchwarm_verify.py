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
