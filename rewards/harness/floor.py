"""The physical floor: the least time the reference's work could take on this hardware.

A floor must be a floor. It assumes the fastest math the reference itself may use (tensor-core
TF32 for fp32 when the harness allows TF32, the dtype's own tensor-core peak otherwise) and the
memory bandwidth ceiling, and it is never above what the reference itself was measured to take:
when it would be, the FLOP/byte estimate or a ceiling is wrong for this task, so no floor is
reported and ``floor_skipped`` says why (the reward layer then skips its check).
"""

from __future__ import annotations


def peak_flops(ceilings: dict, dtype: str, tf32_allowed: bool) -> float:
    """The fastest FLOP rate the reference may reach for ``dtype``."""
    table = ceilings["peak_flops"]
    peak = float(table.get(dtype, table["float32"]))
    if dtype == "float32" and tf32_allowed and ceilings.get("peak_flops_tf32"):
        peak = max(peak, float(ceilings["peak_flops_tf32"]))
    return peak


def physical_floor(ref_flops: float, ref_bytes: float, dtype: str, ceilings: dict, tf32_allowed: bool,
                   ref_runtime_us: float | None) -> tuple[float | None, str | None]:
    """(floor_us, None), or (None, one-sentence reason) when the floor would exceed the
    reference's own measured runtime.

    >>> ce = {"bandwidth_Bps": 1e12, "peak_flops": {"float32": 1e12}, "peak_flops_tf32": 1e13}
    >>> physical_floor(1e6, 1e6, "float32", ce, False, 10.0)
    (1.0, None)
    >>> physical_floor(1e8, 0, "float32", ce, True, 50.0)  # TF32 allowed: 10 us, not 100 us
    (10.0, None)
    >>> print(physical_floor(1e8, 0, "float32", ce, False, 50.0)[1])
    the floor (100 us) is above the reference's own measured runtime (50 us), so its FLOP/byte estimate or a ceiling does not fit this task
    """
    floor = max(float(ref_bytes) / float(ceilings["bandwidth_Bps"]),
                float(ref_flops) / peak_flops(ceilings, dtype, tf32_allowed)) * 1e6
    if ref_runtime_us and floor > float(ref_runtime_us):
        return None, (f"the floor ({floor:.3g} us) is above the reference's own measured runtime "
                      f"({float(ref_runtime_us):.3g} us), so its FLOP/byte estimate or a ceiling does not fit this task")
    return floor, None
