"""The red-team cases that are more than one pdctl command (cases.py `script`): hostile clients of
the pd-stack simulator, and `pdctl down` against stale or racing state.

    python benchmarks/redteam/clients.py NAME [ARG]

run by run.py in the case's folder with the checkout under test first on PYTHONPATH, so the
simulator and pdctl started here are that checkout's. Each scenario prints what it saw, relays the
simulator's stderr and pdctl's output to its own (a traceback there fails the case, as any), and
exits 0 when the target held, 1 with `FAIL: why` otherwise. Every wait has a deadline.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

MODEL = "meta-llama/Llama-3.1-8B-Instruct"  # in the planner's catalog: the simulator needs no hub
WAIT = 60.0  # seconds: the bound on every wait here
SLOW = "inter-token-delay=0.02"  # a fault that keeps requests running: 50 tokens a second


class Failed(Exception):
    pass


def until(condition: Callable[[], bool], what: str, seconds: float = WAIT) -> None:
    ends = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > ends:
            raise Failed(f"{what}: not within {seconds:g} s")
        time.sleep(0.1)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _health(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as response:
            return int(response.status) == 200
    except OSError:
        return False


@contextmanager
def simulator(*flags: str, env: dict[str, str] | None = None) -> Iterator[Any]:
    """A simulator process on 127.0.0.1 (its URL and the process); its stderr relayed after."""
    port = _free_port()
    argv = [sys.executable, "-m", "pdctl.simulator", "serve", MODEL, "--host", "127.0.0.1"]
    argv += ["--port", str(port), *flags]
    side = {"VLLM_NIXL_SIDE_CHANNEL_PORT": str(_free_port())}
    with tempfile.TemporaryFile() as err:
        process = subprocess.Popen(
            argv, env={**os.environ, **side, **(env or {})}, stdout=subprocess.DEVNULL, stderr=err
        )
        url = f"http://127.0.0.1:{port}"
        try:
            until(lambda: _health(url) or process.poll() is not None, "the simulator starts")
            if process.poll() is not None:
                raise Failed(f"the simulator exited with {process.returncode}")
            yield url, process
        finally:
            process.terminate()
            try:
                process.wait(timeout=WAIT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            err.seek(0)
            sys.stderr.write(err.read().decode(errors="replace"))


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=WAIT)


def _post(url: str, raw: bytes) -> tuple[int, Any]:
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=WAIT)
    try:
        connection.request("POST", "/v1/completions", raw, {"Content-Type": "application/json"})
        response = connection.getresponse()
        body = response.read()
    except (OSError, http.client.HTTPException) as error:
        raise Failed(f"no answer: {error!r}") from None
    finally:
        connection.close()
    try:
        return response.status, json.loads(body or b"null")
    except ValueError:
        return response.status, body[:200]


def _vllm_error(status: int, answer: Any, code: int) -> None:
    """vLLM's ErrorResponse: {"error": {"message", "type", "param", "code"}}."""
    print(f"answer {status}: {json.dumps(answer)[:300]}")
    error = answer.get("error") if isinstance(answer, dict) else None
    if status != code or not isinstance(error, dict) or error.get("code") != code:
        raise Failed(f"expected vLLM's {code} error JSON, got {status}: {str(answer)[:200]}")


def _running(url: str) -> tuple[float, float]:
    """vllm:num_requests_running and _waiting, from /metrics."""
    with urllib.request.urlopen(url + "/metrics", timeout=WAIT) as response:
        text = response.read().decode()
    found = {}
    for name in ("running", "waiting"):
        match = re.search(rf"^vllm:num_requests_{name}\{{[^}}]*\}} (\S+)$", text, re.M)
        found[name] = float(match.group(1)) if match else -1.0
    return found["running"], found["waiting"]


# ---- the simulator ------------------------------------------------------------------------------

GOOD = {"model": MODEL, "prompt": "one two three", "max_tokens": 2}
MALFORMED = {
    "list": b"[1, 2, 3]",
    "null": b"null",
    "not-json": b"{this is not json",
    "max-tokens-abc": json.dumps({**GOOD, "max_tokens": "abc"}).encode(),
    "max-tokens-nan": b'{"model": "%s", "prompt": "a", "max_tokens": NaN}' % MODEL.encode(),
    "max-tokens-negative": json.dumps({**GOOD, "max_tokens": -5}).encode(),
    "max-tokens-zero": json.dumps({**GOOD, "max_tokens": 0}).encode(),
    "kv-params-list": json.dumps({**GOOD, "kv_transfer_params": [1]}).encode(),
}


def malformed(kind: str) -> None:
    """One malformed body: vLLM's 400 JSON, and the engine still serves."""
    with simulator() as (url, _):
        _vllm_error(*_post(url, MALFORMED[kind]), code=400)
        status, _ = _post(url, json.dumps(GOOD).encode())
        if status != 200:
            raise Failed(f"a good request after it answered {status}")


def oversized_body() -> None:
    """Content-Length: 10^9, nothing sent: refused unread."""
    with simulator() as (url, _), _connect(url) as connection:
        connection.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n"
        )
        try:
            reply = connection.makefile("rb").read()
        except TimeoutError:
            raise Failed(f"no answer within {WAIT:g} s: the server waits for 1 GB") from None
        head, _, body = reply.partition(b"\r\n\r\n")
        print(head.split(b"\r\n")[0].decode())
        _vllm_error(int(head.split()[1]), json.loads(body), code=413)


def _dropped(url: str, sent: bytes) -> None:
    with _connect(url) as connection:
        connection.sendall(sent)
        try:
            connection.makefile("rb").read()  # ends when the server closes
        except TimeoutError:
            raise Failed(f"the connection was held for {WAIT:g} s") from None


def slow_body() -> None:
    """10 bytes of a 1,000-byte body, then nothing: dropped (the simulator's 30 s read limit)."""
    with simulator() as (url, _):
        _dropped(url, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")


def idle_connection() -> None:
    """A kept-alive connection left idle: closed (VLLM_HTTP_TIMEOUT_KEEP_ALIVE, here 1 s)."""
    with simulator(env={"VLLM_HTTP_TIMEOUT_KEEP_ALIVE": "1"}) as (url, _):
        _dropped(url, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")


def _stream(url: str, max_tokens: int) -> socket.socket:
    body = json.dumps({"model": MODEL, "prompt": "a b c", "max_tokens": max_tokens, "stream": True})
    connection = _connect(url)
    connection.sendall(
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n{body}".encode()
    )
    return connection


def abandoned_streams() -> None:
    """50 streams of 8,000 tokens at 50 a second, read once, then closed: all aborted."""
    with simulator("--sim-fault", SLOW) as (url, _):
        streams = [_stream(url, 8000) for _ in range(50)]
        for connection in streams:
            if b"HTTP/1.1 200" not in connection.recv(65536):
                raise Failed("a stream did not start")
        until(lambda: _running(url) == (50.0, 0.0), "50 requests run")
        for connection in streams:
            connection.close()
        until(lambda: _running(url) == (0.0, 0.0), "the engine aborts the abandoned streams")
        print("running, waiting:", _running(url))


def _rss(process: subprocess.Popen[bytes]) -> int:
    status = Path(f"/proc/{process.pid}/status").read_text()
    return int(re.search(r"^VmRSS:\s+(\d+) kB", status, re.M).group(1)) * 1024  # type: ignore[union-attr]


def refused_prompts() -> None:
    """4 MB prompts longer than the model, refused: the engine's memory does not grow with
    their number (each used to be kept: 50 took it from 27 to 260 MB)."""
    prompt = json.dumps({"model": MODEL, "prompt": "w " * (2 * 1024**2), "max_tokens": 4})
    with simulator() as (url, process):
        for _ in range(20):  # to the allocator's high-water mark (about 40 MB above the start)
            status, _ = _post(url, prompt.encode())
            if status != 400:
                raise Failed(f"a prompt longer than the model answered {status}")
        before = _rss(process)
        for _ in range(30):
            _post(url, prompt.encode())
        grown = _rss(process) - before
        print(f"RSS grew {grown / 1e6:.1f} MB over 30 more refused 4 MB prompts")
        if grown > 20e6:  # kept, they would take 120 MB
            raise Failed(f"RSS grew {grown / 1e6:.0f} MB: the engine keeps refused requests")


def bench_interrupted() -> None:
    """`pdctl bench` stopped with Ctrl-C: the engine aborts its requests."""
    with simulator("--sim-fault", SLOW) as (url, _):
        argv = [sys.executable, "-m", "pdctl", "bench", "--url", url, "--concurrency", "8"]
        argv += ["--requests", "16", "--input-len", "5", "--output-len", "5000"]
        bench = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            until(lambda: _running(url)[0] == 8.0, "the bench's 8 requests run")
            bench.send_signal(signal.SIGINT)
            out, _ = bench.communicate(timeout=WAIT)
            sys.stdout.write(out.decode(errors="replace"))
        finally:
            if bench.poll() is None:
                bench.kill()
                bench.wait()
        until(lambda: _running(url) == (0.0, 0.0), "the engine aborts the bench's requests")


# ---- pdctl down ---------------------------------------------------------------------------------


def _pdctl(*argv: str, timeout: float = WAIT) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pdctl", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    return done


def _state_folder(release: str) -> Path:
    from pdctl.local import state  # the checkout under test's (first on PYTHONPATH)

    return state.Folder.of(release).path


def alive(process: subprocess.Popen[bytes]) -> bool:
    """Whether a `cat` process still lives: it echoes a line (a killed one gives end of file;
    no race with a signal's delivery)."""
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(b"ping\n")
        process.stdin.flush()
    except BrokenPipeError:
        return False
    return process.stdout.readline() == b"ping\n"


def down_stale_state() -> None:
    """A supervisor killed with SIGKILL left `ready` in its state; its pids now belong to another
    program (here `cat`, started after): `down` must leave that program alone."""
    stranger = subprocess.Popen(
        ["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        folder = _state_folder("pd")
        folder.mkdir(parents=True)
        state = {"release": "pd", "status": "ready", "detail": "", "supervisor": stranger.pid}
        state |= {"engine": "sim", "router": None, "engines": [], "logs": str(folder / "logs")}
        state["pids"] = {"pd-engine": stranger.pid, "router": stranger.pid}
        (folder / "state.json").write_text(json.dumps(state), encoding="utf-8")
        done = _pdctl("down")
        if not alive(stranger):
            raise Failed("pdctl down killed a process it did not start (a reused pid)")
        if done.returncode != 0:
            raise Failed(f"pdctl down exited {done.returncode}")
    finally:
        stranger.kill()
        stranger.wait()


SLOW_HELM = """#!/bin/sh
case "$1" in
  version) echo v3.17.2 ;;
  template) touch "{work}/helm.rendering"; exec sleep 300 ;;
  *) exit 1 ;;
esac
"""


def _values() -> str:
    """pdctl init's 1P1D layout of the 8B model (the simulator runs it on a CPU)."""
    init = ["init", "-m", MODEL, "--gpus", "2", "--offline", "--mode", "pd", "--out", "pd.yaml"]
    if _pdctl(*init).returncode != 0:
        raise Failed("pdctl init did not write the values")
    return "pd.yaml"


def down_racing_up() -> None:
    """`pdctl down` while `pdctl up` renders (a slow helm): down ends cleanly, up ends too
    (stopped) and starts nothing."""
    values = _values()
    work = Path.cwd()
    helm = work / "slow-helm"
    helm.write_text(SLOW_HELM.replace("{work}", str(work)), encoding="utf-8")
    helm.chmod(0o755)
    up = subprocess.Popen(
        [sys.executable, "-m", "pdctl", "up", "-f", values, "--engine", "sim", "--helm", str(helm)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        until(lambda: (work / "helm.rendering").exists() or up.poll() is not None, "helm renders")
        down = _pdctl("down")
        try:
            out, _ = up.communicate(timeout=WAIT)
        except subprocess.TimeoutExpired:
            raise Failed(f"pdctl up still runs {WAIT:g} s after pdctl down") from None
        sys.stdout.write(out.decode(errors="replace"))
        if down.returncode != 0:
            raise Failed(f"pdctl down exited {down.returncode} while up rendered")
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()


def down_after_kill() -> None:
    """`pdctl up` of the simulator, then SIGKILL to its supervisor: status says dead (not
    ready), down ends cleanly and the state then says stopped."""
    done = _pdctl("up", "-f", _values(), "--engine", "sim", "--timeout", "90", timeout=120)
    if done.returncode != 0:
        raise Failed(f"pdctl up exited {done.returncode}")
    folder = _state_folder("pd")
    state = json.loads((folder / "state.json").read_text(encoding="utf-8"))
    try:
        os.kill(int(state["supervisor"]), signal.SIGKILL)
        shown = _pdctl("status", "-o", "json")
        found = json.loads(shown.stdout) if shown.stdout.strip().startswith("{") else {}
        if found.get("status") != "dead":
            raise Failed(f"status says {found.get('status')!r} after the supervisor's SIGKILL")
    finally:
        down = _pdctl("down")
    after = json.loads((folder / "state.json").read_text(encoding="utf-8"))
    if down.returncode != 0 or after.get("status") != "stopped":
        raise Failed(f"down exited {down.returncode}; the state says {after.get('status')!r}")


CLIENTS: dict[str, Callable[..., None]] = {
    "malformed": malformed,
    "oversized-body": oversized_body,
    "slow-body": slow_body,
    "idle-connection": idle_connection,
    "abandoned-streams": abandoned_streams,
    "refused-prompts": refused_prompts,
    "bench-interrupted": bench_interrupted,
    "down-stale-state": down_stale_state,
    "down-racing-up": down_racing_up,
    "down-after-kill": down_after_kill,
}


def main(argv: list[str]) -> int:
    try:
        CLIENTS[argv[0]](*argv[1:])
    except Failed as failed:
        print(f"FAIL: {failed}", flush=True)
        return 1
    print("held", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
