"""Run the red-team set (cases.py) against a pd-stack checkout and judge every case.

    .venv/bin/python benchmarks/redteam/run.py [--repo DIR] [--only TEXT] [--area N] [--record]

Each case runs `python -m pdctl ARGS` (or a scenario of clients.py: `python clients.py ARGS`,
which starts the simulator and pdctl of the checkout under test) as a subprocess in a fresh
folder of its own, in a new
process group, under a 4 GiB address-space limit (RLIMIT_AS), with TMPDIR, HOME and KUBECONFIG
(a cluster address nothing listens on) inside that folder, and a deadline after which its whole
process group is killed. The invariants (README.md) are checked for every case; the verdict is
`pass` or `fail` with the first broken invariant as the reason.

The interpreter is DIR/.venv/bin/python when the checkout has one, else this one (with DIR first
on PYTHONPATH). --record writes benchmarks/records/redteam-<commit>.json beside this script.
"""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.redteam.cases import API_KEY, AREAS, CASES, GOOD, SECRETS, Case  # noqa: E402
from benchmarks.redteam.hostile_server import HostileServer  # noqa: E402

CLIENTS = Path(__file__).resolve().parent / "clients.py"  # this checkout's, for any --repo
MEMORY_LIMIT = 4 * 1024**3
OUTPUT_CAP = 64 * 1024**2  # bytes of each stream kept for judging
SIGNAL_WAIT = 20.0  # seconds to wait for the fake helm to start rendering before signalling
UNREACHABLE_KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: nowhere
  cluster: {server: "https://127.0.0.1:9"}
users:
- name: u
  user: {token: not-a-secret}
contexts:
- name: nowhere
  context: {cluster: nowhere, user: u, namespace: default}
current-context: nowhere
"""
# A fake helm (a shell script, NOT helm): records each of its pids, then behaves as named.
FAKE_HELM_HEAD = '#!/bin/sh\necho $$ >> "{work}/helm.pids"\n'
FAKE_HELM = {
    "hang-version": 'case "$1" in version) exec sleep 300 ;; esac\nexit 1\n',
    "slow-template": (
        'case "$1" in\n'
        "  version) echo v3.17.2 ;;\n"
        '  template) echo $$ > "{work}/helm.rendering"; exec sleep 300 ;;\n'
        "  *) exit 1 ;;\n"
        "esac\n"
    ),
    "echo-values": (
        'case "$1" in\n'
        "  version) echo v3.17.2 ;;\n"
        "  *) while [ $# -gt 0 ]; do\n"
        '       if [ "$1" = "--values" ] || [ "$1" = "-f" ]; then cat "$2" >&2; fi; shift\n'
        "     done\n"
        '     echo "Error: values refused" >&2; exit 1 ;;\n'
        "esac\n"
    ),
}
SCRIPT = '#!/bin/sh\ntouch "{marker}"\ncat\n'


@dataclass(frozen=True)
class Target:
    """The checkout under test and the programs the cases name."""

    repo: Path
    python: str
    helm3: Path
    helm4: Path

    @classmethod
    def of(cls, repo: Path, helm3: Path | None = None, helm4: Path | None = None) -> Target:
        repo = repo.resolve()
        venv = repo / ".venv" / "bin" / "python"
        python = str(venv) if venv.exists() else sys.executable
        return cls(repo, python, helm3 or _tool(repo, "3.17.2"), helm4 or _tool(repo, "4.1.4"))

    def commit(self) -> str:
        """The last commit that changed the code under test (pdctl/, helm/, schemas/), with
        "-dirty" when those have uncommitted changes."""
        paths = ["--", "pdctl", "helm", "schemas"]
        git = ["git", "-C", str(self.repo)]
        last = subprocess.run(
            [*git, "log", "-1", "--format=%h", "--abbrev=7", *paths],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        changed = subprocess.run(
            [*git, "status", "--porcelain", *paths], capture_output=True, text=True, check=False
        ).stdout.strip()
        return (last or "unknown") + ("-dirty" if changed else "")


def _tool(repo: Path, version: str) -> Path:
    for base in (repo, ROOT):
        path = base / ".tools" / f"helm-{version}" / "helm"
        if path.exists():
            return path
    return repo / ".tools" / f"helm-{version}" / "helm"


@dataclass
class Result:
    id: str
    area: int
    rc: int | None
    seconds: float
    verdict: str
    reason: str
    stdout: str = ""
    stderr: str = ""

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "area": self.area,
            "rc": self.rc,
            "seconds": round(self.seconds, 2),
            "verdict": self.verdict,
            "reason": self.reason,
        }


# ---- setting a case up -------------------------------------------------------------------------


class Places(dict[str, str]):
    def fill(self, text: str) -> str:
        for key, value in self.items():
            text = text.replace("{" + key + "}", value)
        return text


def _setup(case: Case, work: Path, places: Places) -> None:
    (work / "good-values.yaml").write_text(GOOD, encoding="utf-8")
    (work / "kubeconfig").write_text(UNREACHABLE_KUBECONFIG, encoding="utf-8")
    for kind, name, *rest in case.setup:
        path = work / name
        if kind == "file":
            path.write_text(places.fill(rest[0]), encoding="utf-8")
        elif kind == "bytes":
            path.write_bytes(bytes.fromhex(rest[0]))
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "link":
            path.symlink_to(places.fill(rest[0]))
        elif kind == "dir":
            path.mkdir(parents=True, exist_ok=True)
        elif kind == "sparse":
            with path.open("wb") as file:
                file.truncate(int(rest[0]))
        elif kind == "many":
            for index in range(int(rest[0])):
                (path / f"v{index}-values.yaml").write_text("", encoding="utf-8")
        elif kind in ("script", "helm"):
            body = SCRIPT if kind == "script" else FAKE_HELM_HEAD + FAKE_HELM[rest[0]]
            path.write_text(places.fill(body), encoding="utf-8")
            path.chmod(path.stat().st_mode | stat.S_IXUSR)
        else:
            raise ValueError(f"{case.id}: unknown setup step {kind!r}")


def _environment(case: Case, target: Target, work: Path, places: Places) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": str(work / "home"),
        "TMPDIR": str(work / "tmp"),
        "KUBECONFIG": str(work / "kubeconfig"),
        "PDCTL_HELM": str(target.helm4),
        "PYTHONPATH": str(target.repo),
        "PYTHONDONTWRITEBYTECODE": "1",
        "HF_HUB_OFFLINE": "1",
        "NO_COLOR": "1",
        "TERM": "dumb",
        "COLUMNS": "200",
    }
    env.update({key: places.fill(value) for key, value in case.env})
    return env


def _limits() -> None:
    os.setsid()
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


@contextmanager
def _servers(case: Case, places: Places) -> Iterator[list[HostileServer]]:
    with ExitStack() as stack:
        servers = []
        for name, mode in case.servers:
            server = stack.enter_context(HostileServer(mode, key=API_KEY))
            places[name] = server.url
            servers.append(server)
        yield servers


# ---- running it ----------------------------------------------------------------------------------


def _feed(process: subprocess.Popen[bytes], stdin: str | bytes | None) -> threading.Thread:
    def write() -> None:
        assert process.stdin is not None
        try:
            if stdin == "endless":
                chunk = b"# endless comment line\n" * 4096
                while process.poll() is None:
                    process.stdin.write(chunk)
            elif isinstance(stdin, bytes):
                process.stdin.write(stdin)
            process.stdin.close()
        except (BrokenPipeError, OSError, ValueError):
            pass

    return _thread(write)


def _drain(stream: IO[bytes], into: bytearray) -> threading.Thread:
    """Collect a stream, keeping at most OUTPUT_CAP bytes (the rest is read and dropped)."""

    def read() -> None:
        for chunk in iter(lambda: stream.read(65536), b""):
            if len(into) < OUTPUT_CAP:
                into.extend(chunk)

    return _thread(read)


def _thread(target: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def _signal_when_rendering(process: subprocess.Popen[bytes], case: Case, work: Path) -> None:
    if case.signal is None:
        return
    deadline = time.monotonic() + SIGNAL_WAIT
    while not (work / "helm.rendering").exists() and time.monotonic() < deadline:
        if process.poll() is not None:
            return
        time.sleep(0.1)
    time.sleep(0.5)
    if process.poll() is None:
        process.send_signal(getattr(signal, f"SIG{case.signal}"))


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _helm_pids(work: Path) -> list[int]:
    path = work / "helm.pids"
    if not path.exists():
        return []
    return [int(line) for line in path.read_text().split() if line.isdigit()]


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_case(case: Case, target: Target, keep: Path | None = None) -> Result:
    """Run one case in a fresh folder and judge it."""
    base = Path(tempfile.mkdtemp(prefix=f"redteam-{case.id[:40]}-"))
    work = base / "work"
    try:
        for folder in (work, work / "home", work / "tmp"):
            folder.mkdir()
        places = Places(
            work=str(work),
            marker=str(work / "EXECUTED-BY-PDCTL"),
            values=str(work / "good-values.yaml"),
            repo=str(target.repo),
            helm3=str(target.helm3),
            helm4=str(target.helm4),
        )
        with _servers(case, places) as servers:
            _setup(case, work, places)
            argv = [places.fill(arg) for arg in case.argv]
            env = _environment(case, target, work, places)
            start = time.monotonic()
            program = ["-m", "pdctl"] if case.script is None else [str(CLIENTS)]
            process = subprocess.Popen(
                [target.python, *program, *argv],
                cwd=work,
                env=env,
                stdin=subprocess.PIPE if case.stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                preexec_fn=_limits,
            )
            out, err = bytearray(), bytearray()
            assert process.stdout is not None and process.stderr is not None
            readers = [_drain(process.stdout, out), _drain(process.stderr, err)]
            if case.stdin is not None:
                _feed(process, case.stdin)
            _thread(lambda: _signal_when_rendering(process, case, work))
            timed_out = False
            try:
                process.wait(timeout=case.deadline)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(process)
                process.wait()
            seconds = time.monotonic() - start
            for reader in readers:
                reader.join(timeout=10)
            authorized = sum(server.authorized for server in servers)
        left = [pid for pid in _helm_pids(work) if _alive(pid)]
        _kill_group(process)
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        stdout = bytes(out).decode("utf-8", "replace")
        stderr = bytes(err).decode("utf-8", "replace")
        reason = _judge(case, work, process.returncode, timed_out, stdout, stderr, left)
        if reason is None and case.authorized and not authorized:
            reason = "the server never got the API key"
        if keep is not None:
            shutil.copytree(work, keep / case.id, symlinks=True, dirs_exist_ok=True)
        return Result(
            case.id,
            case.area,
            None if timed_out else process.returncode,
            seconds,
            "pass" if reason is None else "fail",
            reason or "",
            stdout,
            stderr,
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _judge(
    case: Case,
    work: Path,
    rc: int,
    timed_out: bool,
    stdout: str,
    stderr: str,
    left: Sequence[int],
) -> str | None:
    """The first invariant the case broke, or None."""
    both = stdout + stderr
    streams = {"stdout": stdout, "stderr": stderr}
    if timed_out:
        return f"no end within {case.deadline:g} s (process group killed)"
    if "MemoryError" in both:
        return "MemoryError: over the 4 GiB address-space limit"
    if "Traceback (most recent call last)" in both:
        return "traceback: " + _last_line(both)
    if left:
        return f"helm still running after pdctl ended (pids {', '.join(map(str, left))})"
    if (work / "EXECUTED-BY-PDCTL").exists():
        return "a program named in the input was executed"
    for name in case.absent:
        if (work / name).exists() or (work / name).is_symlink():
            return f"{name} exists: something was written that should not be"
    for stream in case.secret_streams:
        leaked = [secret for secret in SECRETS if secret in streams[stream]]
        if leaked:
            return f"secret printed on {stream}: {leaked[0][:6]}..."
    if "\x1b" in both:
        return "a raw ESC reached the terminal"
    left_tmp = sorted(p.name for p in (work / "tmp").glob("pdctl-values-*"))
    if left_tmp:
        return f"temporary folder left in TMPDIR: {left_tmp[0]}"
    if rc < 0 and rc not in case.expect:
        return f"killed by signal {-rc}"
    if rc not in case.expect:
        return f"exit {rc}, expected {sorted(case.expect)}: " + _last_line(both)
    for text in case.show:
        if text not in both:
            return f"the output does not show {text!r}"
    for text in case.forbid:
        if text in both:
            return f"the output shows {text!r}: " + _last_line(both)
    return None


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return (lines[-1] if lines else "(no output)")[:160].encode("unicode_escape").decode()


# ---- the whole set -------------------------------------------------------------------------------


def select(cases: Sequence[Case], only: Sequence[str], areas: Sequence[int]) -> list[Case]:
    chosen = [c for c in cases if not areas or c.area in areas]
    if only:
        chosen = [c for c in chosen if any(fnmatch.fnmatch(c.id, f"*{o}*") for o in only)]
    return chosen


def helm_versions(target: Target) -> dict[str, str]:
    versions = {}
    for name, path in (("helm3", target.helm3), ("helm4", target.helm4)):
        result = subprocess.run(
            [str(path), "version", "--template", "{{.Version}}"],
            capture_output=True,
            text=True,
            check=False,
        )
        versions[name] = result.stdout.strip() or f"unavailable: {path}"
    return versions


def record(target: Target, results: Sequence[Result]) -> dict[str, object]:
    areas = {
        str(area): {
            "name": name,
            "cases": sum(r.area == area for r in results),
            "failed": sum(r.area == area and r.verdict == "fail" for r in results),
        }
        for area, name in AREAS.items()
    }
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": target.commit(),
        "helm": helm_versions(target),
        "python": sys.version.split()[0],
        "memory_limit_bytes": MEMORY_LIMIT,
        "passed": sum(r.verdict == "pass" for r in results),
        "failed": sum(r.verdict == "fail" for r in results),
        "areas": areas,
        "cases": [r.as_dict() for r in results],
    }


def _report(result: Result) -> Result:
    rc = "-" if result.rc is None else str(result.rc)
    print(
        f"{result.verdict:4}  {result.id:50} {rc:>4} {result.seconds:6.1f}s  {result.reason}",
        flush=True,
    )
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, default=ROOT, help="checkout to test")
    parser.add_argument("--only", action="append", default=[], help="ids containing this")
    parser.add_argument("--area", action="append", type=int, default=[], help="1-8")
    parser.add_argument("--record", action="store_true", help="write the JSON record")
    parser.add_argument("--keep", type=Path, help="copy each case's folder here")
    parser.add_argument("--list", action="store_true", help="list the cases and stop")
    parser.add_argument(
        "--jobs", type=int, default=1, help="cases at once (each may take 4 GiB of memory)"
    )
    parser.add_argument("--helm3", type=Path)
    parser.add_argument("--helm4", type=Path)
    args = parser.parse_args(argv)
    cases = select(CASES, args.only, args.area)
    if args.list:
        for c in cases:
            print(f"{c.id:50} {c.area}  {c.note}")
        return 0
    target = Target.of(args.repo, args.helm3, args.helm4)
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda c: _report(run_case(c, target, args.keep)), cases))
    data = record(target, results)
    print()
    print(f"{'area':<40} {'cases':>5} {'failed':>6}")
    for area, entry in data["areas"].items():  # type: ignore[attr-defined]
        print(f"{area + ' ' + entry['name']:<40} {entry['cases']:>5} {entry['failed']:>6}")
    print(f"{data['passed']} passed, {data['failed']} failed")
    if args.record:
        path = ROOT / "benchmarks" / "records" / f"redteam-{data['commit']}.json"
        path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    return 1 if data["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
