"""Pull the ``ModelNew`` program out of a model response, saying why when it cannot.

Rules, in order:
- bytes are decoded as UTF-8 with replacement (a non-UTF-8 response is not fatal);
- fenced blocks (```python, ```py, ``` or ~~~) are collected; the last block that defines
  ``class ModelNew`` wins (models often show the reference first, then the answer);
- an unterminated final fence (a truncated response) is taken to the end of the text;
- no fence at all: the text from the first ``import``/``from``/``class`` line, if it defines
  ``ModelNew``;
- the chosen code must parse as Python; otherwise the reason is recorded.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

_FENCE = re.compile(r"^(```|~~~)[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:^\1[ \t]*$|\Z)", re.M | re.S)
_MODELNEW = re.compile(r"^\s*class\s+ModelNew\b", re.M)
_CODE_START = re.compile(r"^(import |from |class |def |@)", re.M)
_PY_LANGS = {"", "python", "py", "python3"}


@dataclass
class Extraction:
    code: str | None
    malformed: str | None  # why there is no usable code; None when code is fine
    notes: list[str]


def to_text(response: str | bytes) -> tuple[str, list[str]]:
    if isinstance(response, bytes):
        try:
            return response.decode("utf-8"), []
        except UnicodeDecodeError:
            return response.decode("utf-8", errors="replace"), ["response was not valid UTF-8"]
    if "\ufffd" in response:
        return response, ["response holds undecodable characters"]
    return response, []


def blocks(text: str) -> list[tuple[str, str, bool]]:
    """(language, body, terminated) for each fenced block."""
    out = []
    for m in _FENCE.finditer(text):
        body = m.group(3)
        terminated = m.end() < len(text) or text.rstrip().endswith(m.group(1))
        out.append((m.group(2).lower(), body, terminated))
    return out


def extract_code(response: str | bytes) -> Extraction:
    text, notes = to_text(response)
    if not text.strip():
        return Extraction(None, "empty response", notes)
    found = blocks(text)
    py = [(lang, body, term) for lang, body, term in found if lang in _PY_LANGS]
    with_model = [b for b in py if _MODELNEW.search(b[1])]
    if len(with_model) > 1:
        notes.append(f"{len(with_model)} code blocks define ModelNew; took the last")
    if with_model:
        _, code, terminated = with_model[-1]
        if not terminated:
            notes.append("the last code block is not closed (truncated response?)")
    elif py:
        return Extraction(None, "no code block defines class ModelNew", notes)
    elif found:
        return Extraction(None, "no python code block (only " +
                          ", ".join(sorted({lang or 'plain' for lang, _, _ in found})) + ")",
                          notes)
    else:
        m = _CODE_START.search(text)
        if not m or not _MODELNEW.search(text[m.start():]):
            return Extraction(None, "no code block and no class ModelNew in the response", notes)
        code = text[m.start():]
        notes.append("no code block; took the text from the first code line")
    code = code.rstrip() + "\n"
    try:
        ast.parse(code)
    except SyntaxError as e:
        trunc = any("truncated" in n for n in notes)
        why = "truncated response: " if trunc else ""
        return Extraction(None, f"{why}code does not parse (line {e.lineno}: {e.msg})", notes)
    return Extraction(code, None, notes)


_JSON_FENCE = re.compile(r"```(?:json)?[ \t]*\n(.*?)(?:```|\Z)", re.S)


def extract_json_text(response: str | bytes) -> str:
    """The JSON object in a response: a ```json block, else the outermost {...} span."""
    text, _ = to_text(response)
    for m in _JSON_FENCE.finditer(text):
        if m.group(1).strip().startswith("{"):
            return m.group(1).strip()
    start, end = text.find("{"), text.rfind("}")
    return text[start:end + 1] if 0 <= start < end else text.strip()
