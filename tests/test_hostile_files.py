"""Hostile input files: FIFOs, devices, endless stdin, bad links in a scanned directory, deep
YAML and JSON, control characters, binary files. Each ends with a clear message, never a hang,
a MemoryError or a traceback.

Whatever could hang or eat memory runs pdctl as a subprocess under an address-space limit and a
deadline (subprocess's timeout), and the test asserts the message it ended with.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from pdctl import files
from pdctl.bench import dataset, runs
from pdctl.errors import InputError
from pdctl.models.config import load_config_file
from pdctl.values import loader
from pdctl.values.loader import ValuesLoadError, loads

ROOT = Path(__file__).resolve().parent.parent
GOOD = ROOT / "tutorials" / "assets" / "values-16-disagg-prefill.yaml"
DEADLINE_S = 120  # generous on a busy machine; a hang is what it catches
MEMORY = 2 * 1024**3


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def pdctl(*args: str, stdin: int | None = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    """pdctl as a subprocess under MEMORY and DEADLINE_S; a hang fails the test by name."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pdctl", *args],
            stdin=stdin,
            capture_output=True,
            text=True,
            timeout=DEADLINE_S,
            preexec_fn=_limit_memory,
            cwd=ROOT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"pdctl {' '.join(args)} did not end within {DEADLINE_S} s")
    assert "Traceback" not in done.stderr, done.stderr
    return done


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe-values.yaml"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(
    "args",
    [
        ["validate", "{}"],
        ["template", "-f", "{}"],
        ["plan", "-m", "llama-3.1-8b", "--gpus", "2", "--model-config", "{}"],
        ["plan", "-m", "llama-3.1-8b", "--gpus", "2", "--calibrate", "{}"],
        ["bench", "compare", "{}", "{}"],
        ["bench", "--url", "http://127.0.0.1:9", "--dataset", "{}"],
    ],
    ids=["validate", "template", "model-config", "calibrate", "bench-compare", "dataset"],
)
def test_a_fifo_is_refused_not_waited_on(fifo: Path, args: list[str]) -> None:
    done = pdctl(*[str(fifo) if a == "{}" else a for a in args])
    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    assert f"{fifo}" in said and "FIFO (named pipe), not a regular file" in said


@pytest.mark.parametrize("link", [False, True], ids=["device", "link-to-device"])
def test_dev_zero_is_refused_unread(tmp_path: Path, link: bool) -> None:
    path = Path("/dev/zero")
    if link:
        path = tmp_path / "zero-values.yaml"
        path.symlink_to("/dev/zero")
    done = pdctl("validate", str(path), "-o", "json")
    assert done.returncode == 1
    (report,) = json.loads(done.stdout)["files"]
    (finding,) = report["findings"]
    assert finding["rule"] == "FILE" and "a character device" in finding["message"]


def test_endless_stdin_is_read_to_the_limit_only() -> None:
    endless = subprocess.Popen(
        [sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('a: 1\\n' * 1000)"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        done = pdctl("validate", "-", stdin=endless.stdout.fileno() if endless.stdout else None)
    finally:
        endless.kill()
        endless.wait()
    assert done.returncode == 1
    assert f"<stdin>: error YAML005: larger than {loader.MAX_BYTES // 1024**2} MiB" in done.stdout


def test_a_directory_scan_reports_every_file_and_follows_no_bad_link(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "a-values.yaml").write_text(GOOD.read_text())
    (tree / "sub" / "b-values.yaml").write_text(GOOD.read_text())
    (tree / "random-values.yaml").symlink_to("/dev/urandom")
    (tree / "sub" / "loop").symlink_to(tree)  # a link loop
    (tree / "inside-values.yaml").symlink_to("a-values.yaml")  # within the tree: read
    (tree / "control-values.yaml").write_text("a: b\x1b\n")
    os.mkfifo(tree / "pipe-values.yaml")
    done = pdctl("validate", str(tree), "-o", "json")
    assert done.returncode == 1
    reports = {
        Path(r["file"]).relative_to(tree).as_posix(): r for r in json.loads(done.stdout)["files"]
    }
    assert sorted(reports) == [
        "a-values.yaml",
        "control-values.yaml",
        "inside-values.yaml",
        "pipe-values.yaml",
        "random-values.yaml",
        "sub/b-values.yaml",
        "sub/loop",
    ]
    assert all(
        reports[n]["valid"] for n in ("a-values.yaml", "inside-values.yaml", "sub/b-values.yaml")
    )

    def only(name: str) -> dict[str, object]:
        (finding,) = reports[name]["findings"]
        return finding

    assert "symbolic link out of" in str(only("random-values.yaml")["message"])
    assert "FIFO" in str(only("pipe-values.yaml")["message"])
    assert only("control-values.yaml")["line"] == 1 and only("control-values.yaml")["column"] == 5
    loop = only("sub/loop")
    assert loop["severity"] == "warning" and "not followed" in str(loop["message"])


def test_a_directory_scan_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pdctl.validation import inputs

    for i in range(4):
        (tmp_path / f"{i}-values.yaml").write_text("a: 1\n")
    monkeypatch.setattr(inputs, "MAX_FILES", 3)
    with pytest.raises(InputError, match="more than 3 values files"):
        inputs.expand([str(tmp_path)])


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("".join("  " * i + "a:\n" for i in range(400)), loader.MAX_DEPTH + 1),
        ("a: " + "[" * 1000 + "]" * 1000 + "\n", 1),
        ("a:\n" + "".join("  " * i + "- \n" for i in range(1, 500)), loader.MAX_DEPTH + 1),
    ],
    ids=["block-mappings", "flow-lists", "block-lists"],
)
def test_deep_yaml_is_refused_at_the_line_it_passes_the_limit(text: str, line: int) -> None:
    with pytest.raises(ValuesLoadError) as caught:
        loads(text)
    assert (
        caught.value.line == line and f"more than {loader.MAX_DEPTH} levels" in caught.value.reason
    )


def test_yaml_as_deep_as_the_limit_is_read() -> None:
    inner = loader.MAX_DEPTH - 1  # the top-level mapping is the first level
    text = "".join("  " * i + "a:\n" for i in range(inner)) + "  " * inner + "a: 1\n"
    data = loads(text).data
    for _ in range(inner):
        data = data["a"]
    assert data == {"a": 1}


@pytest.mark.parametrize(("char", "code"), [("\x1b", "001B"), ("\x00", "0000"), ("\x07", "0007")])
def test_control_characters_are_a_finding_with_line_and_column(char: str, code: str) -> None:
    with pytest.raises(ValuesLoadError) as caught:
        loads(f"a: 1\nb: x{char}y\n")
    assert (caught.value.line, caught.value.column) == (2, 5)
    assert f"U+{code} is not allowed" in caught.value.reason


def test_a_huge_integer_reads_as_helm_reads_it() -> None:
    """Over 4,300 digits int() refuses; helm keeps such a number as a string."""
    assert loads("a: " + "1" * 5000 + "\n").data == {"a": "1" * 5000}


DEEP_JSON = "[" * 100_000 + "]" * 100_000


def test_deep_json_in_a_dataset(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    path.write_text('{"prompt": "a"}\n{"prompt": ' + DEEP_JSON + "}\n")
    with pytest.raises(InputError, match=r"requests.jsonl:2: not readable JSON: nested too deeply"):
        dataset.load(path)


def test_deep_json_in_a_bench_result(tmp_path: Path) -> None:
    path = tmp_path / "bench.json"
    path.write_text(DEEP_JSON)
    with pytest.raises(InputError, match="bench.json: not readable JSON: nested too deeply"):
        runs.read(path)


@pytest.mark.parametrize(
    "content",
    [bytes(range(256)), b'{"layers": ' + b"9" * 5000 + b"}", DEEP_JSON.encode()],
    ids=["binary", "huge-number", "deep"],
)
def test_a_bad_model_config_is_a_clear_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(content)
    with pytest.raises(InputError, match=r"config.json: (cannot be read as UTF-8|not readable)"):
        load_config_file(path, "x")


@pytest.mark.parametrize("value", ["9" * 400, "NaN", "1e400"], ids=["400-digits", "nan", "inf"])
def test_a_model_config_number_no_model_has_is_refused_by_name(tmp_path: Path, value: str) -> None:
    """Python's JSON reads these; the planner's float arithmetic would overflow (or go NaN) later:
    refused by key path (NaN, which JSON does not have, as it is read)."""
    config = json.loads((ROOT / "tests" / "fixtures" / "configs" / "llama-3.1-8b.json").read_text())
    text = json.dumps(config).replace(
        f'"num_hidden_layers": {config["num_hidden_layers"]}', f'"num_hidden_layers": {value}'
    )
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(InputError) as refused:
        load_config_file(path, "x")
    assert refused.value.message.endswith(
        ("num_hidden_layers: an integer of 400 digits is more than any model's (at most 4,096)",
         "not readable JSON: NaN is not a JSON number",
         "num_hidden_layers: inf is more than any model's (at most 4,096)")
    )  # fmt: skip


def test_a_file_over_its_limit_is_refused_without_reading_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(b" " * 101)
    with pytest.raises(files.UnreadableFile, match="larger than 100 bytes") as caught:
        files.read_bytes(path, 100)
    assert caught.value.too_large
    assert files.read_bytes(path, 101) == b" " * 101


def test_a_directory_is_no_file(tmp_path: Path) -> None:
    with pytest.raises(files.UnreadableFile, match="a directory, not a regular file"):
        files.read_bytes(tmp_path, 100)


@pytest.mark.parametrize(
    "text", ['a: !!int ""\n', "a: !!int abc\n", "a: !!float x\n", "a: !!bool maybe\n"]
)
def test_an_explicit_tag_on_the_wrong_text_is_a_finding(text: str) -> None:
    with pytest.raises(ValuesLoadError) as caught:
        loads(text)
    assert (caught.value.line, caught.value.column) == (1, 4) and "is tagged" in caught.value.reason


def test_a_deep_endpoint_picker_config_string_is_a_finding_not_a_traceback() -> None:
    """routerSpec.llmd.scheduler.config is YAML inside a string: PD022 parses it with the values
    loader's limits, so 2,000 levels of nesting are "not an EndpointPickerConfig"."""
    deep = "[" * 2000
    done = pdctl(
        "validate",
        str(ROOT / "tutorials" / "assets" / "values-25-llm-d-router.yaml"),
        "--set",
        f"routerSpec.llmd.scheduler.config={deep}",
    )
    assert done.returncode == 1
    assert "PD022" in done.stdout and "is not an EndpointPickerConfig" in done.stdout


def test_init_refuses_to_write_into_a_fifo(fifo: Path) -> None:
    """Opening a FIFO to write waits for a reader forever; --force replaces a file, not a pipe."""
    done = pdctl(
        "init", "-m", "llama-3.1-8b", "--gpus", "2", "--offline", "--out", str(fifo), "--force"
    )
    assert done.returncode == 1
    assert "a FIFO (named pipe), not a regular file; pdctl writes only regular files" in done.stderr
    assert fifo.is_fifo()


def test_init_writes_its_file_whole(tmp_path: Path) -> None:
    """The values are written beside the target and renamed over it: no staging file is left."""
    out = tmp_path / "values.yaml"
    out.write_text("old")
    done = pdctl(
        "init", "-m", "llama-3.1-8b", "--gpus", "2", "--offline", "--out", str(out), "--force"
    )
    assert done.returncode == 0, done.stderr
    assert out.read_text().startswith("#") and [p.name for p in tmp_path.iterdir()] == [
        "values.yaml"
    ]
