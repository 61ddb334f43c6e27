# A small pybind11-only extension (no torch headers: a ~5 s build) built at construction in one
# of several real-code shapes; SHAPE is substituted by the test: helper, try, cuda_after, load,
# cuda_before, retry, compile_first.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <pybind11/pybind11.h>
double scale() { return 1.0; }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("scale", &scale); }
"""


def _compile(name):
    return load_inline(name=name, cpp_sources=[SRC], no_implicit_headers=True)


def make_ext(name):  # a helper that calls a helper, as real programs do
    return _compile(name)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.ext = None
        shape = "SHAPE"
        if shape == "helper":
            self.ext = make_ext("km_init_helper")
        elif shape == "try":
            try:
                self.ext = load_inline(name="km_init_try", cpp_sources=[SRC], no_implicit_headers=True)
            except Exception:
                self.ext = None  # falls back to PyTorch
        elif shape == "cuda_after":
            self.ext = make_ext("km_init_cuda_after")
            self.cuda()  # after the build: no GPU in the build worker (nor on a CPU run)
        elif shape == "load":  # torch.utils.cpp_extension.load on a file it writes (its own cwd)
            import os

            from torch.utils.cpp_extension import load

            with open(os.path.join(os.getcwd(), "km_load_src.cpp"), "w") as f:
                f.write(SRC)
            self.ext = load(name="km_init_load", sources=[os.path.join(os.getcwd(), "km_load_src.cpp")])
        elif shape == "retry":  # one name built twice in a process, the first attempt failing (as a
            try:                # failed fast-build rewrite does before the program's own source builds)
                load_inline(name="km_init_retry", cpp_sources=[SRC.replace("1.0;", "undeclared;")],
                            no_implicit_headers=True)
            except Exception:
                pass
            self.ext = load_inline(name="km_init_retry", cpp_sources=[SRC], no_implicit_headers=True)
        elif shape == "compile_first":  # torch.compile in __init__ before the build, as real programs do
            self.fc = torch.compile(self.fc)
            if type(self.fc) is not nn.Linear:
                raise RuntimeError("torch.compile compiled while constructing")
            self.ext = make_ext("km_init_compile_first")
        elif shape == "cuda_before":
            self.fc = self.fc.cuda()  # before the build: a GPU run keeps it on the CPU in the build worker
            self.register_buffer("buf", torch.zeros(2, device="cuda"))
            if torch.cuda.is_available():
                self.ext = make_ext("km_init_cuda_before")

    def forward(self, x):
        y = F.gelu(self.fc(x))
        return y * self.ext.scale() if self.ext is not None else y
