"""A small C/C++/CUDA tokenizer: comments and literals stripped, names `::`-qualified.

Enough lexing to reason about extension sources without regexes over whole files:
identifiers (``at::native::mm`` is one token), numbers, string/char literals (kept as one
``str`` token, so an asm body can still be read), preprocessor lines (one ``pp`` token) and
punctuation (``<<<``, ``>>>``, ``->`` and ``::`` are single tokens).

>>> [t.text for t in tokenize('at::matmul(a, b); // at::conv2d\\n/* x */ k<<<g, b>>>(p);')]
['at::matmul', '(', 'a', ',', 'b', ')', ';', 'k', '<<<', 'g', ',', 'b', '>>>', '(', 'p', ')', ';']
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tok:
    kind: str  # ident | number | str | pp | punct
    text: str
    line: int


_PUNCT3 = ("<<<", ">>>", "...", "<<=", ">>=")
_PUNCT2 = ("::", "->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||",
           "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=")


def _ident_start(c: str) -> bool:
    return c.isalpha() or c == "_"


def _ident_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def tokenize(src: str) -> list[Tok]:
    out: list[Tok] = []
    i, n, line = 0, len(src), 1
    bol = True  # at beginning of a line (only whitespace so far)
    while i < n:
        c = src[i]
        if c == "\n":
            line += 1
            i += 1
            bol = True
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
            continue
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            line += src.count("\n", i, j)
            i = j
            continue
        if c == "#" and bol:
            j = i
            while j < n and src[j] != "\n":  # honour line continuations
                if src[j] == "\\" and j + 1 < n and src[j + 1] == "\n":
                    j += 1
                    line += 1
                j += 1
            text = " ".join(src[i + 1 : j].replace("\\\n", " ").split())
            c_end = text.find("//")
            out.append(Tok("pp", text if c_end < 0 else text[:c_end].strip(), line))
            i = j
            continue
        bol = False
        if c == 'R' and src.startswith('R"', i):  # raw string R"delim( ... )delim"
            k = src.find("(", i + 2)
            delim = src[i + 2 : k]
            end = src.find(")" + delim + '"', k)
            end = n if end < 0 else end + len(delim) + 2
            out.append(Tok("str", src[k + 1 : max(k + 1, end - len(delim) - 2)], line))
            line += src.count("\n", i, end)
            i = end
            continue
        if c in "\"'":
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            out.append(Tok("str", src[i + 1 : j], line))
            i = j + 1
            continue
        if _ident_start(c):
            j = i
            while True:
                while j < n and _ident_char(src[j]):
                    j += 1
                # join `a :: b` into one qualified name
                k = j
                while k < n and src[k] in " \t":
                    k += 1
                if src.startswith("::", k):
                    m = k + 2
                    while m < n and src[m] in " \t":
                        m += 1
                    if m < n and (_ident_start(src[m]) or src[m] == "~"):
                        j = m + (1 if src[m] == "~" else 0)
                        continue
                break
            out.append(Tok("ident", "".join(src[i:j].split()), line))
            i = j
            continue
        if c == ":" and src.startswith("::", i):  # leading ::name (global namespace)
            m = i + 2
            if m < n and _ident_start(src[m]):
                i = m
                continue
        if c.isdigit() or (c == "." and i + 1 < n and src[i + 1].isdigit()):
            j = i + 1
            while j < n and (_ident_char(src[j]) or src[j] == "." or
                             (src[j] in "+-" and src[j - 1] in "eEpP")):
                j += 1
            out.append(Tok("number", src[i:j], line))
            i = j
            continue
        for p in _PUNCT3 + _PUNCT2:
            if src.startswith(p, i):
                out.append(Tok("punct", p, line))
                i += len(p)
                break
        else:
            out.append(Tok("punct", c, line))
            i += 1
    return out


def line_of(src: str, lineno: int) -> str:
    """The stripped text of one source line (1-based), for evidence strings."""
    lines = src.splitlines()
    return lines[lineno - 1].strip() if 0 < lineno <= len(lines) else ""
