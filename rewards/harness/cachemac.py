"""HMAC-SHA256 over the harness's on-disk caches (baselines, build artefacts).

The key is a file the orchestrator creates (0600, in a 0700 directory) and only the
orchestrator reads: candidate processes run as another user or with that directory hidden
(sandbox.py), so a candidate that can write cache files still cannot write a valid MAC for
them. Every MAC binds a kind and the entry's cache key to the content, so a valid entry moved
under another key (another candidate's ``.so``, a baseline of another task) fails as well.

>>> k = b"k" * 32
>>> t = mac(k, "baseline", "task__cpu", b"{}")
>>> verify(k, "baseline", "task__cpu", b"{}", t), verify(k, "baseline", "other", b"{}", t)
(True, False)
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
import secrets

KEY_BYTES = 32


def key_path(cache_root: str, key_file: str | None = None) -> str:
    """``harness.cache_key_file`` when set, else ``<cache>/.keys/cache_mac.key``."""
    if key_file:
        return os.path.abspath(os.path.expanduser(key_file))
    return os.path.join(os.path.abspath(os.path.expanduser(cache_root)), ".keys", "cache_mac.key")


@functools.cache
def _read_or_create(path: str) -> bytes:
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    if not os.path.exists(path):
        # written whole under a private name, then linked into place: a second orchestrator
        # racing us reads a complete key (link fails if one exists), never an empty file
        tmp = f"{path}.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(KEY_BYTES))
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            os.remove(tmp)
    with open(path, "rb") as f:
        key = f.read()
    if len(key) < KEY_BYTES:  # a truncated or planted short key would make MACs guessable
        raise ValueError(f"the cache MAC key {path} is shorter than {KEY_BYTES} bytes; delete it "
                         "(every cached baseline and build is then measured or built again)")
    return key


def load_key(cache_root: str, key_file: str | None = None) -> bytes:
    """The cache's MAC key, created on first use (orchestrator only; workers never call this)."""
    return _read_or_create(key_path(cache_root, key_file))


def mac(key: bytes, kind: str, name: str, payload: bytes) -> str:
    head = json.dumps([kind, name]).encode() + b"\0"  # kind and cache key bound to the content
    return hmac.new(key, head + payload, hashlib.sha256).hexdigest()


def verify(key: bytes, kind: str, name: str, payload: bytes, tag: object) -> bool:
    return isinstance(tag, str) and hmac.compare_digest(mac(key, kind, name, payload), tag)


def tree_digest(root: str, skip: frozenset[str] = frozenset()) -> bytes:
    """A canonical listing of every regular file under ``root`` (relative path, size, sha256),
    names in ``skip`` left out at any depth; links are listed as links (never followed)."""
    rows = []
    for d, dirs, files in os.walk(root):  # a link to a directory is in ``dirs``, never descended
        dirs[:] = sorted(x for x in dirs if x not in skip)
        for n in sorted(files + [x for x in dirs if os.path.islink(os.path.join(d, x))]):
            if n in skip:
                continue
            p = os.path.join(d, n)
            rel = os.path.relpath(p, root)
            if os.path.islink(p):
                rows.append([rel, "link", os.readlink(p)])
                continue
            h = hashlib.sha256()
            with open(p, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            rows.append([rel, os.path.getsize(p), h.hexdigest()])
    return json.dumps(rows).encode()


def fingerprint(path: str, skip: frozenset[str] = frozenset()) -> tuple:
    """Stat rows of a file, or of every file under a directory but ``skip`` (links not followed)."""
    rows = []
    if os.path.isdir(path) and not os.path.islink(path):
        for d, dirs, files in os.walk(path):
            dirs[:] = sorted(x for x in dirs if x not in skip)
            for n in sorted(x for x in files + [x for x in dirs if os.path.islink(os.path.join(d, x))] if x not in skip):
                p = os.path.join(d, n)
                st = os.lstat(p)
                rows.append((os.path.relpath(p, path), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
        return tuple(rows)
    try:
        st = os.lstat(path)
    except OSError:
        return ("missing",)
    return ((st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns),)


def key_id(key: bytes) -> str:
    """A public fingerprint of the key: an entry signed under another key (a new key file, a
    changed ``cache_key_file``) is told apart from a forged one."""
    return hashlib.sha256(b"km-cache-key-id\0" + key).hexdigest()[:16]


def problem(cache: str, name: str, reason: str) -> dict:
    """One failed verification, as evidence: ``reason`` is ``mac_mismatch`` (the content changed
    after the orchestrator wrote it: tampering), ``unsigned`` or ``other_key`` (written before
    MACs or under another key: not trusted, redone, not a tamper) or ``unreadable``."""
    return {"cache": cache, "key": name, "reason": reason}


TAMPER = "mac_mismatch"
