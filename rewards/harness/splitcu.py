"""Split a ``load_inline`` CUDA source into a torch-free ``.cu`` and host C++ (issue 17).

A typical LLM ``.cu`` holds kernels and the ``torch::Tensor`` launchers that start them, so nvcc
parses torch's headers three times (cudafe++, cicc, the host gcc). Here the top-level items are
sorted: kernels and device code stay in the ``.cu`` (built with ``no_implicit_headers``: CUDA
headers only), each kernel gets a launch trampoline there, and the host functions move to the C++
binding unit (``main.cpp``, built once more with a precompiled ``torch/extension.h``), their
``k<<<g, b, s, st>>>(args)`` rewritten to ``__km_launch_k(g, b, s, st, args)``. The trampoline
has the kernel's own parameter list, so arguments convert exactly as at the original launch.

Anything this cannot sort with confidence declines (None): templated kernels (their instances
would be made in the host unit, which nvcc no longer sees), namespaces, ``extern`` blocks,
conditional compilation, ``__CUDACC__`` tests, launches it cannot parse. A split that does not
compile or link fails loudly, and the caller builds the original source.
"""

from __future__ import annotations

import re

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_TORCH_INC = re.compile(r"#\s*include\s*[<\"](?:torch|ATen|c10|pybind11|Python)")
_CUDA_KW = re.compile(r"\b(?:__device__|__constant__|__shared__|__managed__|__host__)\b")
_LB = r"(?:__launch_bounds__\s*\([^()]*\)\s*)?"
_KERNEL = re.compile(r"__global__\s+" + _LB + r"(?:static\s+|inline\s+)*void\s+" + _LB +
                     r"(\w+)\s*\((.*)\)\s*$", re.S)
_DECLINE = re.compile(r"\b(?:__CUDACC__|__NVCC__|cudaLaunchKernel|cudaFuncSetAttribute|cudaMemcpyToSymbol"
                      r"|cudaMemcpyFromSymbol|cudaGetSymbolAddress|cudaOccupancy\w*|cooperative_groups)\b")
_TORCH_NS = re.compile(r"^\s*using\s+namespace\s+(?:torch|at|c10|pybind11|py)\b")


def _items(src: str) -> list[str] | None:
    """Top-level items: preprocessor lines, and declarations/definitions ending at ``;`` or at the
    ``}`` that closes a function body. None when the structure is not understood."""
    items, cur, depth, i, n = [], [], 0, 0, len(src)
    at_line_start = True
    while i < n:
        c = src[i]
        if c == "#" and depth == 0 and at_line_start and not "".join(cur).strip():
            j = i
            while True:  # a directive with its continuation lines
                e = src.find("\n", j)
                e = n if e < 0 else e
                if src[e - 1:e] == "\\":
                    j = e + 1
                    continue
                break
            items.append(src[i:e])
            cur, i, at_line_start = [], e, True
            continue
        if c in "\"'":  # a string or char literal, copied whole
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            cur.append(src[i:j + 1])
            i = j + 1
            at_line_start = False
            continue
        cur.append(c)
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth < 0:
                return None
            if depth == 0:
                text = "".join(cur)
                head = text[:text.find("{")]
                if re.search(r"\)\s*(?:const\s*)?(?:noexcept\s*)?(?:->\s*[\w:<>, *&]+)?$", head) and "=" not in head.split("(")[0]:
                    items.append(text)  # a function body closed
                    cur = []
        elif c == ";" and depth == 0:
            items.append("".join(cur))
            cur = []
        if c == "\n":
            at_line_start = True
        elif not c.isspace():
            at_line_start = False
        i += 1
    if depth != 0 or "".join(cur).strip():
        return None
    return [t for t in items if t.strip()]


def _split_top(s: str, sep: str = ",") -> list[str]:
    """``s`` split at top-level separators (outside (), [], {}, <>)."""
    out, depth, cur = [], 0, []
    for c in s:
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        if c == sep and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    out.append("".join(cur))
    return [x.strip() for x in out]


def _params(plist: str) -> tuple[list[str], list[str]] | None:
    """Kernel parameters and their names; None for unnamed or defaulted ones."""
    ps = [p for p in _split_top(plist) if p and p != "void"]
    names = []
    for p in ps:
        m = re.search(r"(\w+)\s*$", p)
        if "=" in p or not m or m.group(1) in ("int", "float", "double", "char", "long", "unsigned", "bool", "size_t"):
            return None
        names.append(m.group(1))
    return ps, names


def _rewrite_launches(text: str, kernels: dict) -> str | None:
    out, pos = [], 0
    for m in re.finditer(r"<<<", text):
        if m.start() < pos:
            continue
        k = re.search(r"(\w+)\s*$", text[pos:m.start()])
        if not k or k.group(1) not in kernels:
            return None
        end = text.find(">>>", m.end())
        if end < 0:
            return None
        cfg = _split_top(text[m.end():end])
        rest = text[end + 3:]
        lead = len(rest) - len(rest.lstrip())
        if not 2 <= len(cfg) <= 4 or not rest.lstrip().startswith("("):
            return None
        cfg += ["0"] * (4 - len(cfg))
        after = rest.lstrip()[1:]
        empty = after.lstrip().startswith(")")
        name_start = pos + k.start(1)
        out.append(text[pos:name_start])
        out.append(f"__km_launch_{k.group(1)}({', '.join(cfg)}{'' if empty else ', '}")
        pos = end + 3 + lead + 1
    out.append(text[pos:])
    return "".join(out)


def split(cuda_source: str) -> tuple[str, str] | None:
    """(torch-free CUDA source, host C++ source), or None when the source is not split."""
    src = _COMMENT.sub(lambda m: "\n" * m.group(0).count("\n") or " ", cuda_source)
    if "<<<" not in src or _DECLINE.search(src):
        return None
    items = _items(src)
    if items is None:
        return None
    cu, cpp, kernels = [], ["#include <cuda_runtime.h>"], {}
    for it in items:
        s = it.strip()
        head = s.split("{", 1)[0]
        if s.startswith("#"):
            if re.match(r"#\s*(?:if|ifdef|ifndef|elif|else|endif|undef)\b", s):
                return None
            if _TORCH_INC.match(s):
                cpp.append(s)
            elif not re.match(r"#\s*pragma\s+once", s):
                cu.append(s)
                cpp.append(s)
        elif re.match(r"(?:namespace\b|extern\b)", s) or (s.startswith("template") and "__global__" in head):
            return None
        elif "__global__" in head:
            m = _KERNEL.search(head)
            if m and "{" not in s and s.endswith(";"):
                cu.append(s)  # a prototype
                continue
            if not m:
                return None
            p = _params(m.group(2))
            if p is None:
                return None
            ps, names = p
            kernels[m.group(1)] = True
            tramp = (f"void __km_launch_{m.group(1)}(dim3 km_g, dim3 km_b, size_t km_s, cudaStream_t km_st"
                     f"{''.join(', ' + x for x in ps)}")
            cu.append(s)
            cu.append(f"{tramp}) {{ {m.group(1)}<<<km_g, km_b, km_s, km_st>>>({', '.join(names)}); }}")
            cpp.append(tramp + ");")
        elif re.search(r"\b__host__\b", head) and re.search(r"\b__device__\b", head):
            cu.append(s)
            cpp.append(s)  # callable from both sides
        elif _CUDA_KW.search(head):
            cu.append(s)
        elif _TORCH_NS.match(s) or "(" in head and "{" in s:
            cpp.append(s)  # a host function (or a torch using-directive)
        else:
            cu.append(s)
            cpp.append(s)  # types and constants both sides need
    host = "\n".join(cpp)
    if not kernels or any("<<<" in c for c in cu if not c.startswith("void __km_launch_")):
        return None  # device-side launches (dynamic parallelism) are left alone
    host = _rewrite_launches(host, kernels)
    if host is None or "<<<" in host:
        return None
    return "#include <cuda.h>\n#include <cuda_runtime.h>\n" + "\n".join(cu) + "\n", host + "\n"
