"""Tokenizer-level analysis of a candidate's C++/CUDA extension sources.

Finds ``__global__`` kernels and which host function launches which, torch/ATen calls made
from inside the extension (``at::matmul``, ``torch::conv2d``, ``at::native::...``, tensor
methods like ``.matmul(``; allocation and shape plumbing are incidental), library calls
(cuBLAS, cuDNN, CUTLASS), streams, threads, and engineering signals.

>>> r = analyze('__global__ void k(float* y){ __shared__ float s[8]; __syncthreads(); }\\n'
...             'torch::Tensor f(torch::Tensor x){ auto y = torch::empty_like(x);'
...             ' k<<<1, 32>>>(y.data_ptr<float>()); return at::matmul(y, x); }')
>>> r.kernels, r.host["f"].launches, [c.name for c in r.host["f"].torch_calls]
(['k'], ['k'], ['at::matmul'])
>>> r.signals["shared_memory"], r.signals["launch_sites"]
(1, 1)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import ops
from .cpp_tokens import Tok, tokenize

LIBRARY_PREFIXES = ("cublas", "cudnn", "cutlass::", "cusparse", "cufft", "curand", "cub::",
                    "cute::")
LIBRARY_NAMES = {"at::cuda::getCurrentCUDABlasHandle", "at::native::getCudnnHandle",
                 "getCurrentCUDABlasHandle", "getCudnnHandle", "cublasLtMatmul"}
STREAM_CREATE = {"cudaStreamCreate", "cudaStreamCreateWithFlags", "cudaStreamCreateWithPriority",
                 "at::cuda::getStreamFromPool", "c10::cuda::getStreamFromPool",
                 "getStreamFromPool", "at::cuda::setCurrentCUDAStream"}
THREADS = {"std::thread", "pthread_create", "std::async", "std::jthread", "fork"}
EXITS = {"exit", "_exit", "std::exit", "abort", "std::abort", "quick_exit", "std::quick_exit"}
FILES = {"fopen", "std::ofstream", "std::ifstream", "std::fstream", "remove", "std::remove",
         "rename", "unlink", "system", "popen", "open", "std::filesystem::remove"}
NETWORK = {"socket", "connect", "curl_easy_init", "getaddrinfo"}
HALF_TYPES = {"half", "__half", "half2", "__half2", "__nv_bfloat16", "__nv_bfloat162",
              "nv_bfloat16", "at::Half", "at::BFloat16", "c10::Half", "c10::BFloat16",
              "at::kHalf", "at::kBFloat16", "torch::kHalf", "torch::kBFloat16", "torch::kFloat16",
              "__float2half", "__float2bfloat16", "__float2half_rn", "__floats2half2_rn",
              "wmma::precision::tf32", "nvcuda::wmma::precision::tf32", "__float_to_tf32"}
VECTOR = {"float4", "float2", "int4", "int2", "half2", "__half2", "double2", "uint4", "__ldg",
          "__nv_bfloat162", "make_float4"}
TENSOR_CORE = ("wmma::", "nvcuda::wmma", "mma::", "__hmma", "cute::", "cutlass::")
TENSOR_CORE_ASM = ("mma.sync", "wgmma", "ldmatrix", "cp.async")


@dataclass(frozen=True)
class CppCall:
    name: str
    line: int
    family: str | None  # heavy-op family when it is one


@dataclass
class HostFn:
    name: str
    line: int
    launches: list[str] = field(default_factory=list)
    torch_calls: list[CppCall] = field(default_factory=list)
    library_calls: list[CppCall] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)  # other functions it calls
    loops: int = 0  # host-side loops: a C++ (CPU) extension computing by hand
    allocs: list[str] = field(default_factory=list)  # torch::empty & co. it calls


@dataclass
class CppReport:
    kernels: list[str] = field(default_factory=list)
    kernel_lines: dict[str, int] = field(default_factory=dict)
    kernel_bodies: dict[str, tuple[str, ...]] = field(default_factory=dict)
    host: dict[str, HostFn] = field(default_factory=dict)
    torch_calls: list[CppCall] = field(default_factory=list)
    library_calls: list[CppCall] = field(default_factory=list)
    streams: list[CppCall] = field(default_factory=list)
    threads: list[CppCall] = field(default_factory=list)
    exits: list[CppCall] = field(default_factory=list)
    files: list[CppCall] = field(default_factory=list)
    network: list[CppCall] = field(default_factory=list)
    half: list[CppCall] = field(default_factory=list)
    static_tensors: list[CppCall] = field(default_factory=list)
    signals: dict[str, int] = field(default_factory=dict)
    bindings: dict[str, str] = field(default_factory=dict)  # python name -> C++ function
    syncs: list[CppCall] = field(default_factory=list)

    def reachable(self, entry: str) -> tuple[list[str], list[CppCall], list[CppCall]]:
        """(kernels launched, torch calls, library calls) reachable from a host function."""
        seen, stack = set(), [entry]
        kernels, torch_calls, libs = [], [], []
        while stack:
            name = stack.pop()
            if name in seen or name not in self.host:
                continue
            seen.add(name)
            fn = self.host[name]
            kernels += fn.launches
            if fn.loops and not self.kernels:
                kernels.append(f"host:{fn.name}")  # CPU extension: the loop nest is the kernel
            torch_calls += fn.torch_calls
            libs += fn.library_calls
            stack += fn.calls
        return kernels, torch_calls, libs


def _is_torch_name(name: str) -> bool:
    return name.startswith(("at::", "torch::", "aten::", "c10::")) or name in ("at", "torch")


def _classify_torch(name: str, line: int, method: bool) -> CppCall | None:
    last = name.split("::")[-1]
    if name.startswith(("at::cuda::", "c10::cuda::", "torch::cuda::", "c10::", "at::detail::")):
        return None  # streams, guards, handles: plumbing (libraries handled separately)
    if ops.is_incidental(last) or last.startswith(("k", "Tensor")) and not method:
        if ops.family(last) is None:
            return None
    if method and ops.family(last) is None and not ops.is_light(last):
        return None  # unknown method: not a torch op (e.g. accessor<...>(), packed_accessor)
    return CppCall(name, line, ops.family(last))


def analyze(source: str) -> CppReport:
    toks = tokenize(source)
    rep = CppReport()
    sig = {"shared_memory": 0, "syncthreads": 0, "vectorized": 0, "tensor_cores": 0,
           "pragma_unroll": 0, "loops_in_kernels": 0, "launch_sites": 0, "warp_shuffle": 0,
           "restrict": 0}
    depth = 0
    current: HostFn | None = None
    current_kernel: str | None = None
    fn_depth = 0
    body: list[str] = []
    global_pending = False
    n = len(toks)
    for i, t in enumerate(toks):
        nxt = toks[i + 1] if i + 1 < n else None
        prev = toks[i - 1] if i else None
        if t.kind == "pp":
            if t.text.startswith("pragma unroll"):
                sig["pragma_unroll"] += 1
            continue
        if t.kind == "str":
            if any(a in t.text for a in TENSOR_CORE_ASM):
                sig["tensor_cores"] += 1
            continue
        if t.kind == "punct" and t.text == "{":
            if current is None and current_kernel is None:
                # a function body opens when the tokens before are `) [qualifiers] {`
                name = _function_name(toks, i)
                if name:
                    if global_pending:
                        current_kernel = name
                        if name not in rep.kernels:
                            rep.kernels.append(name)
                            rep.kernel_lines[name] = t.line
                        body = []
                    else:
                        current = rep.host.setdefault(name, HostFn(name, t.line))
                    fn_depth = depth
                    global_pending = False
            depth += 1
            if current_kernel:
                body.append("{")
            continue
        if t.kind == "punct" and t.text == "}":
            depth -= 1
            if current_kernel:
                body.append("}")
            if depth == fn_depth and (current or current_kernel):
                if current_kernel:
                    rep.kernel_bodies[current_kernel] = tuple(body)
                current, current_kernel = None, None
            continue
        if t.kind == "punct" and t.text == ";" and global_pending and depth == 0:
            global_pending = False  # a declaration, not a definition
        if current_kernel:
            body.append(t.text)
        if t.kind == "punct" and t.text == "<<<":
            sig["launch_sites"] += 1
            name = prev.text if prev and prev.kind == "ident" else _templated_name(toks, i)
            if name and current is not None:  # k<<<...>>> or k<float, 4><<<...>>>
                current.launches.append(name)
            continue
        if t.kind != "ident":
            continue
        name = t.text
        if name == "__global__":
            global_pending = True
            continue
        if name == "__shared__":
            sig["shared_memory"] += 1
        elif name == "__syncthreads":
            sig["syncthreads"] += 1
        elif name in VECTOR or name.startswith(("reinterpret_cast",)) and nxt and nxt.text == "<":
            if name in VECTOR or _template_arg(toks, i) in VECTOR:
                sig["vectorized"] += 1
        elif name.startswith(TENSOR_CORE):
            sig["tensor_cores"] += 1
        elif name.startswith("__shfl"):
            sig["warp_shuffle"] += 1
        elif name == "__restrict__":
            sig["restrict"] += 1
        elif name == "for" and current_kernel:
            sig["loops_in_kernels"] += 1
        elif name in ("for", "while") and current is not None:
            current.loops += 1
        if name in HALF_TYPES:
            rep.half.append(CppCall(name, t.line, None))
        if name == "static" and nxt and nxt.kind == "ident" and nxt.text in (
                "torch::Tensor", "at::Tensor", "Tensor", "std::unordered_map", "std::map"):
            rep.static_tensors.append(CppCall(nxt.text, t.line, None))
        if name == "def" and prev is not None and prev.text == "." and i + 2 < n and \
                toks[i + 2].kind == "str":
            j = i + 3
            while j < n and toks[j].text in (",", "&"):
                j += 1
            if j < n and toks[j].kind == "ident":
                rep.bindings[toks[i + 2].text] = toks[j].text
        if name in ("cudaStreamSynchronize", "cudaStreamWaitEvent", "cudaDeviceSynchronize"):
            rep.syncs.append(CppCall(name, t.line, None))
        is_call = _is_call(toks, i)
        if not is_call:
            continue
        method = prev is not None and prev.text in (".", "->")
        call = None
        if name.startswith(LIBRARY_PREFIXES) or name in LIBRARY_NAMES:
            fam = "conv" if "cudnn" in name.lower() else "gemm" if "blas" in name.lower() or \
                "gemm" in name.lower() or "cutlass" in name.lower() else None
            call = CppCall(name, t.line, fam)
            rep.library_calls.append(call)
            if current:
                current.library_calls.append(call)
        elif _is_torch_name(name) or method:
            if current is not None and name.split("::")[-1] in (
                    "empty", "empty_like", "new_empty", "empty_strided"):
                current.allocs.append(name)
            c = _classify_torch(name, t.line, method)
            if c:
                rep.torch_calls.append(c)
                if current:
                    current.torch_calls.append(c)
        elif current is not None and not method:
            current.calls.append(name)
        for table, bucket in ((STREAM_CREATE, rep.streams), (THREADS, rep.threads),
                              (EXITS, rep.exits), (FILES, rep.files), (NETWORK, rep.network)):
            if name in table and not method:
                bucket.append(CppCall(name, t.line, None))
    rep.signals = sig
    return rep


def _template_arg(toks: list[Tok], i: int) -> str:
    return toks[i + 2].text if i + 2 < len(toks) and toks[i + 1].text == "<" else ""


def _is_call(toks: list[Tok], i: int) -> bool:
    """Identifier followed by `(` or by a balanced `<...>` then `(`."""
    j = i + 1
    if j < len(toks) and toks[j].text == "<":
        d = 0
        while j < len(toks):
            if toks[j].text == "<":
                d += 1
            elif toks[j].text == ">":
                d -= 1
                if d == 0:
                    break
            elif toks[j].text == ">>":
                d -= 2
                if d <= 0:
                    break
            elif toks[j].text in (";", "{", "}"):
                return False
            j += 1
        j += 1
    return j < len(toks) and toks[j].text == "("


def _function_name(toks: list[Tok], brace: int) -> str | None:
    """Name of the function whose body opens at toks[brace], or None (struct, namespace...)."""
    j = brace - 1
    while j >= 0 and toks[j].kind == "ident" and toks[j].text in ("const", "override", "noexcept",
                                                                  "final", "mutable"):
        j -= 1
    if j < 0 or toks[j].text != ")":
        return None
    d = 0
    while j >= 0:
        if toks[j].text == ")":
            d += 1
        elif toks[j].text == "(":
            d -= 1
            if d == 0:
                break
        j -= 1
    if j <= 0 or toks[j - 1].kind != "ident":
        return None
    name = toks[j - 1].text
    if name in ("if", "for", "while", "switch", "catch", "return", "sizeof", "decltype"):
        return None
    return name


def _templated_name(toks, i: int) -> str | None:
    """The kernel name before a template argument list that ends at ``toks[i - 1]``."""
    j, depth = i - 1, 0
    while j >= 0:
        t = toks[j].text
        depth += t.count(">") if t in (">", ">>") else 0
        depth -= 1 if t == "<" else 0
        if depth == 0:
            break
        j -= 1
    if j > 0 and toks[j].text == "<" and toks[j - 1].kind == "ident":
        return toks[j - 1].text
    return None

