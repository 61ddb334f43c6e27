"""What checking the shared PCHs costs each evaluator start (``pchwarm.verify``): every sealed PCH
folder is hashed against its seal. With the light headers' PCH beside the full one, a flag set
holds ~1.4 GB (786 MB + 597 MB on torch 2.13), four flag sets ~5.5 GB.

    python bench/pch_verify.py                      # 4 folders of 1.4 GB (stand-ins of PCH size)
    python bench/pch_verify.py --folders 8 --mb 700

Stand-in folders of the PCHs' size (random bytes; hashing does not care what they hold) are
sealed with the cache's key, then verified one folder at a time (the previous code) and side by
side (the default); each best of ``--repeat``, the page cache warm (as on a machine that used them).
Prints both and the ratio.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from rewards.harness import pchwarm  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--folders", type=int, default=4)
    ap.add_argument("--mb", type=int, default=1400, help="bytes per folder, MB")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="km_pch_verify_") as cache:
        block = os.urandom(1 << 20)
        for i in range(a.folders):
            d = os.path.join(pchwarm.pch_root(cache), f"set{i}")
            os.makedirs(d)
            with open(os.path.join(d, "km_torch_extension.h.gch"), "wb") as f:
                for _ in range(a.mb):
                    f.write(block)
        pchwarm.seal(cache)
        best = {}
        for label, workers in (("one at a time", 1), ("side by side", None)):
            times = []
            for _ in range(a.repeat):
                t0 = time.perf_counter()
                problems = pchwarm.verify(cache, workers=workers)
                times.append(time.perf_counter() - t0)
                assert problems == [], problems  # nothing changed: nothing found
            best[label] = min(times)
            print(f"{label:14s} {best[label]:6.2f} s  ({a.folders} folders x {a.mb} MB, {os.cpu_count()} cores)")
        print(f"ratio: {best['one at a time'] / best['side by side']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
