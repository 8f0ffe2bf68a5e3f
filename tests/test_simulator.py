"""The simulator's command line and engine in this process (pdctl/simulator; not vLLM): bad
flags answered with a message and an exit code, the vLLM flags it reads, the virtual clock, and
an engine without NixlConnector ignoring kv_transfer_params; its wait for SIGTERM ends whenever the
signal comes."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from pdctl.simulator import options, serve
from pdctl.simulator.__main__ import main
from pdctl.simulator.engine import Shape, SimulatedEngine
from tests.helpers import ROOT, STARTUP_LIMIT

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["serve", "nobody/nothing"], 1, "nobody/nothing is not in the planner's model catalog"),
        (["serve", MODEL, "--sim-gpu", "Z80"], 2, "--sim-gpu 'Z80' is not in the GPU catalog"),
        (["serve", MODEL, "--sim-link", "warp"], 2, "--sim-link: links.yaml: no link 'warp'"),
        (["serve", MODEL, "--kv-transfer-config", "{"], 2, "--kv-transfer-config is not JSON"),
        (["serve", MODEL, "--sim-clock", "sundial"], 2, "invalid command line"),
    ],
)
def test_bad_input_is_one_message_and_an_exit_code(
    argv: list[str], code: int, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == code
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_bad_side_channel_port_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VLLM_NIXL_SIDE_CHANNEL_PORT", "56OO")
    assert main(["serve", MODEL]) == 2
    assert "VLLM_NIXL_SIDE_CHANNEL_PORT='56OO' is not a port number" in capsys.readouterr().err


def test_it_reads_the_vllm_flags_it_models_and_ignores_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VLLM_NIXL_SIDE_CHANNEL_HOST", "10.0.0.7")
    monkeypatch.setenv("VLLM_NIXL_SIDE_CHANNEL_PORT", "5601")
    argv = ["serve", MODEL, "--served-model-name", "llama", "alias", "-tp", "2"]
    argv += ["--max-num-batched-tokens", "2048", "--no-enable-prefix-caching"]
    argv += ["--block-size", "32", "--enforce-eager", "--swap-space=4"]  # not modelled
    parsed = options.parse(argv)
    assert (parsed.served_name, parsed.tp, parsed.max_num_batched_tokens) == ("llama", 2, 2048)
    assert not parsed.prefix_caching and parsed.connector is None
    assert (parsed.side_host, parsed.side_port) == ("10.0.0.7", 5601)
    built = serve.build(parsed)
    assert built.engine.timing.budget == 2048 and built.engine.shape.tp == 2
    assert built.link.id == "ib-ndr"  # the H100's usual network, from the GPU catalog


def _complete(url: str, model: str, words: int, max_tokens: int) -> dict[str, object]:
    body = {"model": model, "prompt": " ".join(["w"] * words), "max_tokens": max_tokens}
    request = urllib.request.Request(
        f"{url}/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        answer: dict[str, object] = json.load(response)
    return answer


def test_on_the_virtual_clock_it_reports_the_modelled_times() -> None:
    """The decode phase of 64 tokens of Llama-3.1-8B on an H100 takes 63 modelled decode steps
    (several ms each), reported in vLLM's histogram, whatever the wall clock did."""
    argv = ["serve", MODEL, "--host", "127.0.0.1", "--port", "0", "--sim-clock", "virtual"]
    built = serve.build(options.parse(argv))
    engine = built.engine.up()
    try:
        answer = _complete(engine.url, MODEL, 1000, 64)
        page = engine.metrics()
    finally:
        engine.down()
    assert answer["usage"] == {
        "prompt_tokens": 1000,
        "completion_tokens": 64,
        "total_tokens": 1064,
        "prompt_tokens_details": None,
    }
    step = engine.timing.cost([], [1000])
    (line,) = [x for x in page.splitlines() if x.startswith("vllm:request_decode_time_seconds_sum")]
    decode = float(line.rsplit(" ", 1)[1])
    assert decode == pytest.approx(63 * step, rel=0.05) and step > 0.003
    assert 'clock="virtual"' in page


def test_without_nixl_the_engine_ignores_kv_transfer_params() -> None:
    engine = SimulatedEngine("alone", shape=Shape(nixl=False))
    admitted = engine.admit(["w"] * 40, {"do_remote_decode": True})
    assert admitted.kv_transfer_params is None and admitted.cached == 0


def test_a_request_longer_than_max_model_len_is_refused_as_vllm_does() -> None:
    engine = SimulatedEngine("short", model="m", shape=Shape(max_model_len=100)).up()
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:
            _complete(engine.url, "m", 90, 20)
        answer = json.load(refused.value)
        assert _complete(engine.url, "m", 80, 20)["usage"] is not None  # 100: fits
    finally:
        engine.down()
    assert refused.value.code == 400
    assert answer["error"]["message"].startswith(
        "This model's maximum context length is 100 tokens."
    )
    assert (
        "you requested 110 tokens (90 in the messages, 20 in the completion)"
        in answer["error"]["message"]
    )


def test_help_says_what_it_reads_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        main(["--help"])
    assert ended.value.code == 0
    out = capsys.readouterr().out
    assert "pd-stack's engine simulator (not vLLM)" in out
    assert "every other vLLM flag is accepted and ignored" in out and "--sim-fault" in out


# serve_until while SIGTERM reaches another thread than the main one: the main thread blocks it
# and lets the other thread have Python only once it waits (a switch interval longer than the run).
OTHER_THREAD = """
import os, signal, sys, threading
from pdctl.simulator import serve

class Engine:
    def down(self):
        print("down", flush=True)

sys.setswitchinterval(100)
gate = threading.Lock()
gate.acquire()

def bystander():
    with gate:
        pass
    os.kill(os.getpid(), signal.SIGTERM)

threading.Thread(target=bystander, daemon=True).start()
stop = serve.on_signals()
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
gate.release()
serve.serve_until(Engine(), stop)
"""


def _run_script(source: str) -> subprocess.CompletedProcess[str]:
    """A test program run in its own Python from the repository's root (bounded only against a
    hang)."""
    return subprocess.run(
        [sys.executable, "-c", source],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=STARTUP_LIMIT,
    )


def test_sigterm_taken_by_another_thread_ends_the_wait() -> None:
    """A process-directed SIGTERM (PR_SET_PDEATHSIG's, pdctl down's) is taken by whichever thread
    of the engine gets to it first; Python then runs its handler on the main thread only when that
    thread next runs Python. Waiting on a threading.Event it never did: a killed supervisor's
    engine stayed up with SIGTERM received (its handler tripped) and its main thread waiting.
    serve_until reads the wakeup descriptor that any thread's signal writes. The bound only
    stops a hang."""
    done = _run_script(OTHER_THREAD)
    assert done.returncode == 0 and done.stdout == "down\n", done.stderr


# serve_until once per step of its wait (each call, return and C call a profile hook sees), with
# SIGTERM raised at that step; and at each call that may block, so that a wait past the last step
# ends too. Prints how many steps it tried.
EVERY_STEP = """
import signal, sys
from pdctl.simulator import serve
from tests.doubles.signal_steps import raising_at

class Engine:
    def down(self):
        pass

BLOCKING = frozenset({"read", "acquire", "wait", "select", "poll", "sleep"})
step = seen = 1
while seen >= step:
    stop = serve.on_signals()
    hook, steps_seen = raising_at(step, signal.SIGTERM, BLOCKING)
    sys.setprofile(hook)
    serve.serve_until(Engine(), stop)
    sys.setprofile(None)
    seen = steps_seen()
    step += 1
print(step - 2, "steps")
"""


def test_sigterm_ends_the_wait_at_whichever_step_it_comes() -> None:
    """The engine's wait for SIGTERM (serve.on_signals, serve_until) ends whatever the main thread
    was doing when the signal came. Its handler once set a threading.Event: a SIGTERM handled
    while the main thread held that event's lock, at the start of Event.wait, hung the engine
    for ever (a killed supervisor's PR_SET_PDEATHSIG left it alive); the step that shows it is
    one of those tried here. The bound only stops a hang."""
    done = _run_script(EVERY_STEP)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[0]) > 1, done.stdout
