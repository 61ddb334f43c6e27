"""The OpenAI-compatible backend against real servers on loopback.

- `transformers serve` serving the tiny locally built model (no download; needs fastapi,
  uvicorn and openai installed): chat completions, usage, and `mining run model=openai`
  end to end;
- a real local HTTP server that answers 429 then 200 (retries with backoff), 500 forever
  (gives up with one sentence), and a closed port (unreachable).
"""

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from agents.backends import BackendError, make_backend

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- a real local server with scripted status codes ---------------------------------------
class Scripted(BaseHTTPRequestHandler):
    script: list[int] = []
    seen: list[dict] = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        type(self).seen.append({"body": body, "auth": self.headers.get("authorization")})
        code = type(self).script.pop(0) if type(self).script else 200
        self.send_response(code)
        self.send_header("content-type", "application/json")
        if code == 429:
            self.send_header("retry-after", "0.05")
        self.end_headers()
        if code == 200:
            self.wfile.write(json.dumps({
                "id": "x", "choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": "hello"}}],
                "usage": {"prompt_tokens": 7, "completion_tokens": 1}}).encode())
        else:
            self.wfile.write(b'{"error": "busy"}')

    def log_message(self, *a):
        pass


@pytest.fixture
def scripted():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    Scripted.seen = []
    yield srv, f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()


def backend(url, **kw):
    return make_backend({"backend": "openai", "base_url": url, "model": "m", "retries": 3,
                         "backoff_s": 0.01, "sampling": {"temperature": 0.0}, **kw})


def test_retries_429_and_503_then_succeeds(scripted, monkeypatch):
    _, url = scripted
    Scripted.script = [429, 503]
    monkeypatch.setenv("KM_TEST_KEY", "sk-test")
    b = backend(url, api_key_env="KM_TEST_KEY")
    c = asyncio.run(b.chat([{"role": "user", "content": "hi"}], max_tokens=3))
    assert c.text == "hello" and c.prompt_tokens == 7 and c.completion_tokens == 1
    assert c.extra["retries"] == 2 and len(Scripted.seen) == 3
    assert Scripted.seen[0]["body"]["max_tokens"] == 3 and Scripted.seen[0]["body"]["temperature"] == 0.0
    assert Scripted.seen[0]["auth"] == "Bearer sk-test"


def test_persistent_5xx_gives_up_with_one_sentence(scripted):
    _, url = scripted
    Scripted.script = [500] * 10
    with pytest.raises(BackendError, match=r"HTTP 500.*gave up after 4 attempts"):
        asyncio.run(backend(url).chat([{"role": "user", "content": "hi"}]))


def test_client_error_is_not_retried(scripted):
    _, url = scripted
    Scripted.script = [400]
    with pytest.raises(BackendError, match="HTTP 400"):
        asyncio.run(backend(url).chat([{"role": "user", "content": "hi"}]))
    assert len(Scripted.seen) == 1


def test_unreachable_endpoint_is_one_clear_error():
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(BackendError, match="cannot connect"):
        asyncio.run(backend(url, retries=1).chat([{"role": "user", "content": "hi"}]))


def test_run_with_unreachable_endpoint_exits_with_one_sentence(tmp_path):
    url = f"http://127.0.0.1:{free_port()}/v1"
    p = subprocess.run([sys.executable, "-m", "mining", "run", "model=openai",
                        f"model.base_url={url}", "model.model=m", "harness.device=cpu",
                        f"store.root={tmp_path}"], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 2 and "unreachable" in p.stderr and "Traceback" not in p.stderr


def test_run_without_model_says_what_to_do(tmp_path):
    p = subprocess.run([sys.executable, "-m", "mining", "run", f"store.root={tmp_path}"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "no model is configured" in p.stderr
    assert "model=openai" in p.stderr and "Traceback" not in p.stderr


# -- transformers serve on loopback with the tiny local model ----------------------------
def _serve_available() -> bool:
    try:
        from transformers.utils import is_serve_available  # noqa: F401
    except ImportError:
        return False
    from transformers.utils import is_serve_available
    return is_serve_available() and (Path(sys.executable).with_name("transformers").exists()
                                     or shutil.which("transformers") is not None)


@pytest.fixture(scope="module")
def tiny_server(tmp_path_factory):
    if not _serve_available():
        pytest.skip("transformers serve needs fastapi, uvicorn and openai (pip install transformers[serving])")
    from agents.tiny_model import build_tiny_model

    path = build_tiny_model(tmp_path_factory.mktemp("tiny"))
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    exe = Path(sys.executable).with_name("transformers")
    proc = subprocess.Popen([str(exe) if exe.exists() else "transformers", "serve", str(path),
                             "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while True:
        try:
            if httpx.get(base + "/health", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail("transformers serve did not start: " + (proc.stdout.read() or "")[-2000:])
        time.sleep(0.5)
    yield {"url": base + "/v1", "model": str(path)}
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.mark.slow
def test_chat_against_transformers_serve(tiny_server):
    b = make_backend({"backend": "openai", "base_url": tiny_server["url"],
                      "model": tiny_server["model"], "concurrency": 2,
                      "sampling": {"max_tokens": 12}})

    async def go():
        msgs = [[{"role": "user", "content": f"write a relu kernel {i}"}] for i in range(3)]
        try:
            return await asyncio.gather(*(b.chat(m) for m in msgs))
        finally:
            await b.aclose()

    outs = asyncio.run(go())
    for c in outs:
        assert isinstance(c.text, str) and c.latency_s > 0
        assert c.prompt_tokens and c.prompt_tokens > 5 and 0 < c.completion_tokens <= 12
        assert c.finish_reason in ("length", "stop")


@pytest.mark.slow
def test_mining_run_end_to_end_against_transformers_serve(tiny_server, tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "mining", "run", "+task=level3", "task.ids=[l3_01_mlp]",
         "model=openai", f"model.base_url={tiny_server['url']}",
         f"model.model={tiny_server['model']}", "model.sampling.max_tokens=24",
         "harness.device=cpu", f"store.root={tmp_path / 'data'}",
         f"harness.cache_dir={tmp_path / 'cache'}", "agents.samples_per_task=2",
         "agents.max_turns=3", "run_id=loopback"],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    from mining.store import Store

    s = Store(tmp_path / "data")
    trajs = s.read("trajectories").to_pylist()
    assert sorted(t["trajectory_id"] for t in trajs) == ["loopback:l3_01_mlp:s0", "loopback:l3_01_mlp:s1"]
    turns = s.read("turns").to_pylist()
    coder = [t for t in turns if t["role"] == "coder"]
    assert coder and all(t["prompt_tokens"] and t["completion_tokens"] for t in coder)
    assert all(t["policy"].startswith("openai:") for t in turns)
    # a random tiny model writes no ModelNew: recorded as malformed, never sent to the harness
    assert all(t["malformed"] for t in coder if t["code"] is None)
    assert {t["stop_reason"] for t in trajs} <= {"max_turns", "attempts_exhausted"}
    # the planner's unusable answers were retried once and replaced by the fallback plan
    planner = [t for t in turns if t["role"] == "planner"]
    assert planner and all("retry" in (t["malformed"] or "") or t["status"] == "ok" for t in planner)
