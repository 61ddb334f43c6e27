"""The parent-worker message format: round trips, and a crafted message cannot run code."""

import io
import os
import pickle

import pytest
import torch

from rewards.harness import protocol


class Evil:
    def __reduce__(self):
        return (os.system, ("touch /tmp/km-protocol-pwned",))


def test_round_trip_keeps_tensors_and_containers():
    msg = {"trials": [{"outputs": [torch.randn(3, 4), torch.arange(5)], "aliased": False, "non_dense": None}],
           "op_s": 0.5, "name": "x"}
    back = protocol.loads(protocol.dumps(msg))
    assert back["op_s"] == 0.5 and back["trials"][0]["aliased"] is False
    assert torch.equal(back["trials"][0]["outputs"][0], msg["trials"][0]["outputs"][0])
    assert back["trials"][0]["outputs"][1].dtype == torch.int64


@pytest.mark.parametrize("fmt", ["pickle", "zip", "legacy"])
def test_a_crafted_message_is_refused_not_run(fmt, tmp_path):
    if os.path.exists("/tmp/km-protocol-pwned"):
        os.remove("/tmp/km-protocol-pwned")
    if fmt == "pickle":
        data = pickle.dumps({"x": Evil()})
    else:
        buf = io.BytesIO()
        torch.save({"x": Evil()}, buf, _use_new_zipfile_serialization=fmt == "zip")
        data = buf.getvalue()
    with pytest.raises(pickle.UnpicklingError, match="(?i)weights.only|unsupported|global"):
        protocol.loads(data)
    assert not os.path.exists("/tmp/km-protocol-pwned")
