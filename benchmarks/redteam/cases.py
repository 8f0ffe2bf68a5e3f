"""The red-team case table: hostile files, flags and servers for pdctl, one `Case` each.

A case is data: the pdctl arguments, what to set up in its own folder first, what to feed on
stdin, which hostile servers to start, the exit codes that are a right answer, and the extra
invariants it asks for. `run.py` runs each as a subprocess and checks the invariants every case
shares (README.md). Placeholders in arguments, setup contents and environment values:

  {work}    the case's own folder (the working directory of pdctl)
  {marker}  a file that must never exist: hostile scripts touch it when something runs them
  {values}  a values file pdctl accepts (GOOD below, written into {work})
  {repo}    the checkout under test
  {helm3} {helm4}    the pinned helm binaries
  {server} {server2} the base URLs of the case's hostile servers (hostile_server.py)

Areas follow the kinds of hostile input: 1 release and namespace names, 2 files that are not
regular files, 3 input that used to end in a traceback, 4 forms helm accepts or refuses, 5 servers,
6 secrets and control characters, 7 state (temporary files, children, output folders), 8 the local
release (`pdctl down` against stale or racing state; hostile clients of the simulator), 9 files
that `pdctl up` runs as code on this machine (env, commands, flags, listening addresses). A case
with a `script` runs that scenario of clients.py instead of one pdctl command.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

AREAS = {
    1: "release and namespace names",
    2: "non-regular files and scans",
    3: "tracebacks",
    4: "pdctl and helm agree",
    5: "servers",
    6: "secrets and control characters",
    7: "state",
    8: "local release: down and the simulator",
    9: "pdctl up runs files as code",
}

# Known secret strings planted by the cases: none may appear in pdctl's output.
HF_TOKEN = "hf_AbcxxxDefSECRET123"  # a real-looking token that contains "xxx"
WRONG_TYPED = "hf_WrongTypeSECRET456"
EXTRA_KEY = "hf_ExtraKeySECRET000"
API_KEY = "sk-ApiKeySECRET789xxx"
PASSWORD = "pw-PasswordSECRET-hunter2"
ENV_TOKEN = "tok-EnvTokenSECRET-abc"
SECRETS = (HF_TOKEN, WRONG_TYPED, EXTRA_KEY, API_KEY, PASSWORD, ENV_TOKEN)

# A values file the chart accepts (tutorials/assets/values-17-nixl-vllm-router.yaml without its
# comments). {pool0} and {top} are where variations add lines; {tag} is the engines' tag.
_GOOD = """servingEngineSpec:
{top}  modelSpec:
    - name: qwen-prefill
      role: prefill
      repository: vllm/vllm-openai
      tag: {tag}
      modelURL: Qwen/Qwen2.5-7B-Instruct
      replicaCount: 1
      requestCPU: 8
      requestMemory: 48Gi
      requestGPU: 1
      pvcStorage: 50Gi
{pool0}      vllmConfig:
        maxModelLen: 16384
        gpuMemoryUtilization: 0.9
      kvTransfer:
        connector: NixlConnector
    - name: qwen-decode
      role: decode
      repository: vllm/vllm-openai
      tag: v0.33.0
      modelURL: Qwen/Qwen2.5-7B-Instruct
      replicaCount: 1
      requestCPU: 8
      requestMemory: 48Gi
      requestGPU: 1
      pvcStorage: 50Gi
      vllmConfig:
        maxModelLen: 16384
        gpuMemoryUtilization: 0.9
      kvTransfer:
        connector: NixlConnector
routerSpec:
  type: vllm-router
  repository: vllm/vllm-router
  tag: nightly-20260710-b93cbcb
  vllmRouter:
    serviceDiscovery: k8s
    kvConnector: nixl
    prefillPolicy: cache_aware
    decodePolicy: round_robin
"""


def values(pool0: str = "", top: str = "", tag: str = "v0.33.0") -> str:
    """GOOD with lines added to the prefill pool (6 spaces in) or under servingEngineSpec."""
    return _GOOD.replace("{pool0}", pool0).replace("{top}", top).replace("{tag}", tag)


GOOD = values()

Step = tuple[str, ...]  # ("file", name, text) ("bytes", name, hex) ("fifo", name)
# ("link", name, target) ("dir", name) ("sparse", name, size) ("script", name)
# ("helm", name, behaviour): a fake helm, see run.py FAKE_HELM


@dataclass(frozen=True)
class Case:
    id: str
    area: int
    argv: tuple[str, ...]
    expect: frozenset[int]
    note: str
    setup: tuple[Step, ...] = ()
    stdin: str | bytes | None = None  # bytes, or "endless" (comment lines until pdctl stops)
    env: tuple[tuple[str, str], ...] = ()
    servers: tuple[tuple[str, str], ...] = ()  # (placeholder, hostile_server mode)
    deadline: float = 30.0
    signal: str | None = None  # TERM or INT, sent to pdctl once the fake helm renders
    absent: tuple[str, ...] = ()  # paths under {work} that must not exist afterwards
    show: tuple[str, ...] = ()  # text the output must contain
    forbid: tuple[str, ...] = ()  # text the output must not contain
    secret_streams: tuple[str, ...] = ("stdout", "stderr")
    authorized: bool = False  # the hostile server must have seen the API key
    tags: frozenset[str] = field(default_factory=frozenset)
    script: str | None = None  # a scenario of clients.py, run with argv instead of pdctl


def case(
    id: str,  # noqa: A002 - the table's column
    area: int,
    argv: list[str] | tuple[str, ...],
    expect: set[int] | frozenset[int],
    note: str,
    **extra: object,
) -> Case:
    return Case(id, area, tuple(argv), frozenset(expect), note, **extra)  # type: ignore[arg-type]


SCRIPT = ("script", "x.sh")  # touches {marker} when run (a post-renderer)
KEY_FILE = ("file", "key.txt", API_KEY + "\n")
USAGE = {2}
BAD_FILE = {1, 2}
TERMINATED = {1, 3, 130, 143, -2, -15}
_rng = random.Random(29)
BINARY = bytes(_rng.randrange(256) for _ in range(4096)).hex()


def _deep_block(levels: int) -> str:
    return "".join(f"{'  ' * i}k{i}:\n" for i in range(levels)) + "  " * levels + "v\n"


# ---- 1. release and namespace names ----------------------------------------------------------


def _names() -> list[Case]:
    post = "--post-renderer=./x.sh"
    h3 = ("--helm", "{helm3}")
    h4 = ("--helm", "{helm4}")
    out = ("absent", ("evil",))
    cases = [
        case(
            "a1-template-release-post-renderer",
            1,
            ["template", "{values}", f"--release={post}", *h3],
            USAGE,
            "a release starting with -- reaches helm 3 as --post-renderer and runs it",
            setup=(SCRIPT,),
        ),
        case(
            "a1-template-namespace-post-renderer",
            1,
            ["template", "{values}", f"--namespace={post}", *h3],
            USAGE,
            "a namespace starting with -- reaches helm as a flag",
            setup=(SCRIPT,),
        ),
        case(
            "a1-validate-render-release-post-renderer",
            1,
            ["validate", "--render", "{values}", f"--release={post}", *h3],
            USAGE,
            "validate --render hands the release to helm template",
            setup=(SCRIPT,),
        ),
        case(
            "a1-deploy-dry-run-release-post-renderer",
            1,
            ["deploy", "--dry-run", "-f", "{values}", f"--release={post}", *h3],
            USAGE,
            "deploy --dry-run renders with the release as given",
            setup=(SCRIPT,),
        ),
        case(
            "a1-deploy-dry-run-namespace-post-renderer",
            1,
            ["deploy", "--dry-run", "-f", "{values}", f"--namespace={post}", *h3],
            USAGE,
            "deploy --dry-run with a namespace that is a helm flag",
            setup=(SCRIPT,),
        ),
        case(
            "a1-status-release-post-renderer",
            1,
            ["status", f"--release={post}", *h3],
            USAGE,
            "status passes the release to helm status/history",
            setup=(SCRIPT,),
        ),
        case(
            "a1-template-release-output-dir",
            1,
            ["template", "{values}", "--release=--output-dir=evil", *h4],
            USAGE,
            "helm 4 takes --output-dir=evil from the release and writes files",
            absent=out[1],
        ),
        case(
            "a1-template-namespace-output-dir",
            1,
            ["template", "{values}", "--namespace=--output-dir=evil", *h4],
            USAGE,
            "a namespace that is --output-dir",
            absent=out[1],
        ),
        case(
            "a1-deploy-dry-run-release-output-dir",
            1,
            ["deploy", "--dry-run", "-f", "{values}", "--release=--output-dir=evil", *h4],
            USAGE,
            "deploy --dry-run with a release that is --output-dir",
            absent=out[1],
        ),
        case(
            "a1-uninstall-release-dotdot",
            1,
            ["uninstall", "--release", "../x"],
            USAGE,
            "uninstall names a release that no helm release can have",
        ),
        case(
            "a1-verify-release-semicolon",
            1,
            ["verify", "--release", "pd;id"],
            USAGE,
            "verify in cluster mode with a release that is no DNS label",
        ),
        case(
            "a1-bench-namespace-uppercase",
            1,
            ["bench", "-n", "NS"],
            USAGE,
            "bench in cluster mode with an uppercase namespace",
        ),
        case(
            "a1-preflight-release-flag",
            1,
            ["preflight", "-f", "{values}", "--release=--debug"],
            USAGE,
            "preflight with a release that is a helm flag",
        ),
        case(
            "a1-init-release-uppercase",
            1,
            [
                "init",
                "-m",
                "llama-3.1-8b",
                "--gpus",
                "2",
                "--offline",
                "--release",
                "PD",
                "--out",
                "o.yaml",
            ],
            USAGE,
            "init writes values for a release name helm refuses",
            absent=("o.yaml",),
        ),
        case(
            "a1-validate-release-newline",
            1,
            ["validate", "{values}", "--release", "pd\nx"],
            USAGE,
            "validate with a newline in the release",
        ),
        case(
            "a1-validate-namespace-newline",
            1,
            ["validate", "{values}", "-n", "ns\nx"],
            USAGE,
            "a newline in -n breaks a rendered RoleBinding",
        ),
    ]
    releases = {
        "semicolon": "pd;id",
        "dotdot": "../x",
        "newline": "pd\nx",
        "uppercase": "PD",
        "54-chars": "a" * 54,
        "leading-hyphen": "-pd",
        "trailing-hyphen": "pd-",
        "empty": "",
        "space": "pd x",
        "shell": "pd$(touch EXECUTED)",
    }
    for name, release in releases.items():
        cases.append(
            case(
                f"a1-template-release-{name}",
                1,
                ["template", "{values}", "--release", release],
                USAGE,
                f"release {release!r} is no helm release name",
                absent=("EXECUTED",),
            )
        )
    namespaces = {
        "semicolon": "ns;id",
        "dotdot": "../x",
        "newline": "ns\nx",
        "uppercase": "NS",
        "64-chars": "n" * 64,
        "leading-hyphen": "-ns",
    }
    for name, namespace in namespaces.items():
        cases.append(
            case(
                f"a1-template-namespace-{name}",
                1,
                ["template", "{values}", "-n", namespace],
                USAGE,
                f"namespace {namespace!r} is no DNS-1123 label",
            )
        )
    return cases


# ---- 2. files that are not regular files -----------------------------------------------------

FIFO = ("fifo", "fifo-values.yaml")
ZERO_LINK = ("link", "zero-values.yaml", "/dev/zero")
HUGE = ("sparse", "huge.json", str(6 * 1024**3))
CLOSED = "http://127.0.0.1:9"
PLAN = ["plan", "-m", "llama-3.1-8b", "--gpus", "2", "--offline"]
INIT = ["init", "-m", "llama-3.1-8b", "--gpus", "2", "--offline", "--out", "-"]
BENCH_DATASET = ["bench", "--url", CLOSED, "--requests", "1", "--dataset"]


def _files() -> list[Case]:
    scan = (("dir", "scan"), ("file", "scan/good-values.yaml", GOOD))
    cases = [
        case(
            "a2-validate-fifo",
            2,
            ["validate", "fifo-values.yaml"],
            BAD_FILE,
            "a FIFO named as a file hangs validate",
            setup=(FIFO,),
        ),
        case(
            "a2-validate-f-fifo",
            2,
            ["validate", "-f", "fifo-values.yaml"],
            BAD_FILE,
            "a FIFO given with -f",
            setup=(FIFO,),
        ),
        case(
            "a2-template-fifo",
            2,
            ["template", "-f", "fifo-values.yaml"],
            BAD_FILE,
            "template reads a FIFO",
            setup=(FIFO,),
        ),
        case(
            "a2-deploy-dry-run-fifo",
            2,
            ["deploy", "--dry-run", "-f", "fifo-values.yaml"],
            BAD_FILE,
            "deploy reads a FIFO",
            setup=(FIFO,),
        ),
        case(
            "a2-preflight-fifo",
            2,
            ["preflight", "-f", "fifo-values.yaml"],
            BAD_FILE,
            "preflight reads a FIFO",
            setup=(FIFO,),
        ),
        case(
            "a2-validate-dev-zero",
            2,
            ["validate", "/dev/zero"],
            BAD_FILE,
            "/dev/zero has size 0 and never ends",
        ),
        case(
            "a2-up-rendered-fifo",
            2,
            ["up", "--engine", "sim", "render"],
            {1},
            "a FIFO among a rendered folder's .yaml files hangs up",
            setup=(("dir", "render"), ("fifo", "render/a.yaml")),
            show=("a FIFO",),
        ),
        case(
            "a2-up-rendered-zero-link",
            2,
            ["up", "--engine", "sim", "render"],
            {1},
            "a rendered folder's .yaml linking to /dev/zero: MemoryError",
            setup=(("dir", "render"), ("link", "render/a.yaml", "/dev/zero")),
            show=("a character device",),
        ),
        case(
            "a2-validate-zero-link",
            2,
            ["validate", "zero-values.yaml"],
            BAD_FILE,
            "a symlink to /dev/zero",
            setup=(ZERO_LINK,),
        ),
        case(
            "a2-template-dev-zero",
            2,
            ["template", "-f", "/dev/zero"],
            BAD_FILE,
            "template -f /dev/zero",
        ),
        case(
            "a2-validate-stdin-endless",
            2,
            ["validate", "-"],
            BAD_FILE,
            "endless stdin is read whole",
            stdin="endless",
            deadline=45,
        ),
        case(
            "a2-template-stdin-endless",
            2,
            ["template", "-f", "-"],
            BAD_FILE,
            "template -f - with endless stdin",
            stdin="endless",
            deadline=45,
        ),
        case(
            "a2-validate-stdin-over-limit",
            2,
            ["validate", "-"],
            BAD_FILE,
            "5 MiB of comments on stdin (over the size limit)",
            stdin=b"# padding padding padding padding\n" * 150_000,
        ),
        case(
            "a2-validate-scan-urandom",
            2,
            ["validate", "scan"],
            {1},
            "a scan with one *values*.yaml linked to /dev/urandom reports the others",
            setup=(*scan, ("link", "scan/bad-values.yaml", "/dev/urandom")),
            show=("good-values.yaml",),
        ),
        case(
            "a2-validate-scan-fifo",
            2,
            ["validate", "scan"],
            {1},
            "a scan with a FIFO among the files reports the others",
            setup=(*scan, ("fifo", "scan/pipe-values.yaml")),
            show=("good-values.yaml",),
        ),
        case(
            "a2-validate-scan-link-loop",
            2,
            ["validate", "scan"],
            {0, 1},
            "a scan through a link loop",
            show=("good-values.yaml",),
            setup=(
                *scan,
                ("link", "scan/loop", "."),
                ("link", "scan/a", "b"),
                ("link", "scan/b", "a"),
            ),
        ),
        case(
            "a2-validate-scan-link-out",
            2,
            ["validate", "scan"],
            {0, 1},
            "a scan follows a link out of the tree to a file holding a token",
            setup=(
                *scan,
                ("dir", "outside"),
                (
                    "file",
                    "outside/secret-values.yaml",
                    values(pool0=f"      hf_token: {HF_TOKEN}\n"),
                ),
                ("link", "scan/leak-values.yaml", "../outside/secret-values.yaml"),
            ),
        ),
        case(
            "a2-validate-scan-many-files",
            2,
            ["validate", "scan"],
            BAD_FILE,
            "a scan of 3,000 *values*.yaml files",
            deadline=60,
            setup=(("dir", "scan"), ("many", "scan", "3000")),
        ),
        case(
            "a2-validate-f-directory",
            2,
            ["validate", "-f", "scan"],
            BAD_FILE,
            "a directory given with -f",
            setup=scan,
        ),
        case(
            "a2-template-directory",
            2,
            ["template", "-f", "scan"],
            BAD_FILE,
            "template -f DIR",
            setup=scan,
        ),
    ]
    consumers = {
        "plan-model-config": [*PLAN, "--model-config"],
        "init-model-config": [*INIT, "--model-config"],
        "bench-dataset": BENCH_DATASET,
        "plan-calibrate": [*PLAN, "--calibrate"],
    }
    for name, argv in consumers.items():
        cases += [
            case(
                f"a2-{name}-fifo",
                2,
                [*argv, "fifo-values.yaml"],
                BAD_FILE,
                f"{name} reads a FIFO",
                setup=(FIFO,),
            ),
            case(
                f"a2-{name}-dev-zero", 2, [*argv, "/dev/zero"], BAD_FILE, f"{name} reads /dev/zero"
            ),
            case(
                f"a2-{name}-zero-link",
                2,
                [*argv, "zero-values.yaml"],
                BAD_FILE,
                f"{name} reads a link to /dev/zero",
                setup=(ZERO_LINK,),
            ),
            case(
                f"a2-{name}-huge",
                2,
                [*argv, "huge.json"],
                BAD_FILE,
                f"{name} reads a 6 GiB (sparse) file",
                setup=(HUGE,),
                deadline=45,
            ),
        ]
    cases += [
        case(
            "a2-plan-model-config-dir-link",
            2,
            [*PLAN, "--model-config", "mc"],
            BAD_FILE,
            "--model-config DIR whose config.json is a link to /dev/zero",
            setup=(("dir", "mc"), ("link", "mc/config.json", "/dev/zero")),
        ),
        case(
            "a2-bench-compare-fifo",
            2,
            ["bench", "compare", "fifo-values.yaml", "fifo-values.yaml"],
            BAD_FILE,
            "bench compare reads a FIFO",
            setup=(FIFO,),
        ),
        case(
            "a2-bench-compare-dev-zero",
            2,
            ["bench", "compare", "/dev/zero", "/dev/zero"],
            BAD_FILE,
            "bench compare reads /dev/zero",
        ),
        case(
            "a2-bench-compare-huge",
            2,
            ["bench", "compare", "huge.json", "huge.json"],
            BAD_FILE,
            "bench compare reads a 6 GiB (sparse) file",
            setup=(HUGE,),
            deadline=45,
        ),
        case(
            "a2-bench-compare-directory",
            2,
            ["bench", "compare", "scan", "scan"],
            BAD_FILE,
            "bench compare given directories",
            setup=scan,
        ),
    ]
    return cases


# ---- 3. input that ended in a traceback ------------------------------------------------------

_MODEL_CONFIG = (
    '{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, '
    '"intermediate_size": 14336, "max_position_embeddings": 131072, "num_attention_heads": 32, '
    '"num_hidden_layers": LAYERS, "num_key_value_heads": 8, "vocab_size": 128256, '
    '"torch_dtype": "bfloat16"}'
)


def _tracebacks() -> list[Case]:
    deep_flow = "a: " + "[" * 1000 + "]" * 1000 + "\n"
    cases = [
        case(
            "a3-validate-deep-block-400",
            3,
            ["validate", "deep.yaml"],
            {1},
            "YAML mappings nested 400 levels (PyYAML recursion)",
            setup=(("file", "deep.yaml", _deep_block(400)),),
        ),
        case(
            "a3-validate-deep-block-1200",
            3,
            ["validate", "deep.yaml"],
            {1},
            "YAML mappings nested 1,200 levels (helm refuses above 1,000)",
            setup=(("file", "deep.yaml", _deep_block(1200)),),
        ),
        case(
            "a3-validate-deep-flow-1000",
            3,
            ["validate", "deep.yaml"],
            {1},
            "flow sequences nested 1,000 levels",
            setup=(("file", "deep.yaml", deep_flow),),
        ),
        case(
            "a3-validate-deep-flow-100000",
            3,
            ["validate", "deep.yaml"],
            {1},
            "flow sequences nested 100,000 levels (under the size limit)",
            setup=(("file", "deep.yaml", "a: " + "[" * 100_000 + "\n"),),
        ),
        case(
            "a3-validate-deep-flow-map",
            3,
            ["validate", "deep.yaml"],
            {1},
            "flow mappings nested 2,000 levels",
            setup=(("file", "deep.yaml", "a: " + "{b: " * 2000 + "1" + "}" * 2000 + "\n"),),
        ),
        case(
            "a3-template-deep-block",
            3,
            ["template", "-f", "deep.yaml"],
            {1},
            "template -f with 400 nested levels",
            setup=(("file", "deep.yaml", _deep_block(400)),),
        ),
        case(
            "a3-validate-stdin-deep",
            3,
            ["validate", "-"],
            {1},
            "deep YAML on stdin",
            stdin=_deep_block(600).encode(),
        ),
        case(
            "a3-validate-esc-byte",
            3,
            ["validate", "esc.yaml"],
            {1},
            "an ESC byte in a comment (ReaderError outside the try)",
            setup=(("file", "esc.yaml", "# \x1b[2J\n" + GOOD),),
        ),
        case(
            "a3-validate-nul-byte",
            3,
            ["validate", "nul.yaml"],
            {1},
            "a NUL byte in a value",
            setup=(("file", "nul.yaml", GOOD + "x: a\x00b\n"),),
        ),
        case(
            "a3-validate-stdin-esc",
            3,
            ["validate", "-"],
            {1},
            "an ESC byte on stdin",
            stdin=b"a: \x1b[31mred\n",
        ),
        case(
            "a3-template-esc-byte",
            3,
            ["template", "-f", "esc.yaml"],
            {1},
            "template -f with an ESC byte",
            setup=(("file", "esc.yaml", "# \x1b\n" + GOOD),),
        ),
        case(
            "a3-validate-binary",
            3,
            ["validate", "bin.yaml"],
            {1},
            "4 KiB of random bytes",
            setup=(("bytes", "bin.yaml", BINARY),),
        ),
        case(
            "a3-validate-invalid-utf8",
            3,
            ["validate", "bad.yaml"],
            {1},
            "a byte that is not UTF-8",
            setup=(("bytes", "bad.yaml", b"a: \xff\n".hex()),),
        ),
        case(
            "a3-validate-utf16",
            3,
            ["validate", "u16.yaml"],
            {0, 1},
            "the values file in UTF-16",
            setup=(("bytes", "u16.yaml", GOOD.encode("utf-16").hex()),),
        ),
        case(
            "a3-validate-max-model-len-1e999",
            3,
            ["validate", "big.yaml"],
            {1},
            "a number that reads as infinity where an integer is expected",
            setup=(("file", "big.yaml", GOOD.replace("16384", "1e999", 1)),),
        ),
        case(
            "a3-validate-replicas-huge-int",
            3,
            ["validate", "big.yaml"],
            {1},
            "a 40-digit replica count",
            setup=(
                (
                    "file",
                    "big.yaml",
                    GOOD.replace("replicaCount: 1", "replicaCount: " + "9" * 40, 1),
                ),
            ),
        ),
        case(
            "a3-template-helm-relative-path",
            3,
            ["template", "--summary", "{values}", "--helm", "./h"],
            {0},
            "--helm given as a relative path (./h, a link to the pinned helm 4)",
            setup=(("link", "h", "{helm4}"),),
        ),
        case(
            "a3-validate-set-deep-path",
            3,
            ["validate", "{values}", "--set", ".".join(["a"] * 5000) + "=1"],
            {1, 2},
            "--set with a key path 5,000 levels deep",
        ),
        case(
            "a3-plan-model-config-binary",
            3,
            [*PLAN, "--model-config", "bin.json"],
            {1},
            "a binary --model-config",
            setup=(("bytes", "bin.json", BINARY),),
        ),
        case(
            "a3-plan-model-config-deep",
            3,
            [*PLAN, "--model-config", "deep.json"],
            {1},
            "--model-config nested 100,000 levels",
            setup=(("file", "deep.json", "[" * 100_000),),
        ),
        case(
            "a3-plan-model-config-infinity",
            3,
            [*PLAN, "--model-config", "inf.json"],
            {1},
            "--model-config with num_hidden_layers Infinity",
            setup=(("file", "inf.json", _MODEL_CONFIG.replace("LAYERS", "Infinity")),),
        ),
        case(
            "a3-plan-model-config-nan",
            3,
            [*PLAN, "--model-config", "nan.json"],
            {1},
            "--model-config with num_hidden_layers NaN",
            setup=(("file", "nan.json", _MODEL_CONFIG.replace("LAYERS", "NaN")),),
        ),
        case(
            "a3-plan-model-config-huge-int",
            3,
            [*PLAN, "--model-config", "big.json"],
            {1},
            "--model-config with a 400-digit layer count",
            setup=(("file", "big.json", _MODEL_CONFIG.replace("LAYERS", "9" * 400)),),
        ),
        case(
            "a3-plan-model-config-list",
            3,
            [*PLAN, "--model-config", "list.json"],
            {1},
            "--model-config whose top level is a list",
            setup=(("file", "list.json", "[1]"),),
        ),
        case(
            "a3-bench-dataset-deep",
            3,
            [*BENCH_DATASET, "deep.jsonl"],
            {1},
            "a dataset line nested 100,000 levels",
            setup=(("file", "deep.jsonl", '{"prompt": ' + "[" * 100_000 + "\n"),),
        ),
        case(
            "a3-bench-dataset-binary",
            3,
            [*BENCH_DATASET, "bin.jsonl"],
            {1},
            "a binary dataset",
            setup=(("bytes", "bin.jsonl", BINARY),),
        ),
        case(
            "a3-bench-dataset-nul",
            3,
            [*BENCH_DATASET, "nul.jsonl"],
            {1},
            "a NUL byte in a dataset line",
            setup=(("file", "nul.jsonl", '{"prompt": "a\x00b"}\n'),),
        ),
        case(
            "a3-bench-compare-deep",
            3,
            ["bench", "compare", "deep.json", "deep.json"],
            {1},
            "a bench file nested 100,000 levels",
            setup=(("file", "deep.json", "[" * 100_000),),
        ),
        case(
            "a3-bench-compare-binary",
            3,
            ["bench", "compare", "bin.json", "bin.json"],
            {1},
            "a binary bench file",
            setup=(("bytes", "bin.json", BINARY),),
        ),
        case(
            "a3-bench-compare-nan",
            3,
            ["bench", "compare", "nan.json", "nan.json"],
            {1},
            "a bench file whose numbers are NaN and Infinity",
            setup=(
                (
                    "file",
                    "nan.json",
                    '{"steps": [{"concurrency": NaN, "rate": Infinity, "requests": NaN}]}',
                ),
            ),
        ),
        case(
            "a3-plan-calibrate-deep",
            3,
            [*PLAN, "--calibrate", "deep.json"],
            {1},
            "--calibrate nested 100,000 levels",
            setup=(("file", "deep.json", "[" * 100_000),),
        ),
        case(
            "a3-plan-calibrate-binary",
            3,
            [*PLAN, "--calibrate", "bin.json"],
            {1},
            "a binary --calibrate file",
            setup=(("bytes", "bin.json", BINARY),),
        ),
        case(
            "a3-plan-calibrate-infinity",
            3,
            [*PLAN, "--calibrate", "inf.json"],
            {1},
            "--calibrate whose steps are Infinity",
            setup=(("file", "inf.json", '{"steps": Infinity, "workload": NaN}'),),
        ),
    ]
    verify = [
        "verify",
        "--url",
        "{server}",
        "--prefill-url",
        "{server}",
        "--decode-url",
        "{server}",
        "--timeout",
        "5",
        "--settle",
        "0",
    ]
    for mode in ("inf-counters", "nan-counters"):
        cases.append(
            case(
                f"a3-verify-{mode}",
                3,
                [*verify, "--connector", "NixlConnector"],
                {1},
                f"/metrics counters that become {mode.split('-')[0]} (int(inf))",
                servers=(("server", mode),),
                deadline=60,
            )
        )
    return cases


# ---- 4. pdctl and helm agree -----------------------------------------------------------------


def _helm_forms() -> list[Case]:
    pool = "servingEngineSpec.modelSpec[0]"
    tab_sep = GOOD.replace("  type: vllm-router", "  type:\tvllm-router")
    duplicate = ("duplicate key",)
    return [
        case(
            "a4-validate-chart-values",
            4,
            ["validate", "{repo}/helm/values.yaml"],
            {0, 1},
            "the chart's own values.yaml (as helm show values prints it)",
            forbid=duplicate,
        ),
        case(
            "a4-template-chart-values",
            4,
            ["template", "--summary", "-f", "{repo}/helm/values.yaml"],
            {0, 1},
            "template with the chart's own values.yaml",
            forbid=duplicate,
        ),
        case(
            "a4-validate-trailing-document",
            4,
            ["validate", "v.yaml"],
            {0},
            "a trailing empty --- (helm accepts it)",
            setup=(("file", "v.yaml", GOOD + "---\n"),),
        ),
        case(
            "a4-validate-trailing-document-comment",
            4,
            ["validate", "v.yaml"],
            {0},
            "a trailing --- holding only a comment",
            setup=(("file", "v.yaml", GOOD + "---\n# the end\n"),),
        ),
        case(
            "a4-template-trailing-document",
            4,
            ["template", "--summary", "-f", "v.yaml"],
            {0},
            "template with a trailing ---",
            setup=(("file", "v.yaml", GOOD + "---\n"),),
        ),
        case(
            "a4-validate-second-document",
            4,
            ["validate", "v.yaml"],
            {1},
            "a second non-empty document stays refused",
            setup=(("file", "v.yaml", GOOD + "---\na: 1\n"),),
        ),
        case(
            "a4-validate-tab-separator",
            4,
            ["validate", "v.yaml"],
            {0},
            "a tab after a colon (helm accepts it)",
            setup=(("file", "v.yaml", tab_sep),),
        ),
        case(
            "a4-template-tab-separator",
            4,
            ["template", "--summary", "-f", "v.yaml"],
            {0},
            "template with a tab after a colon",
            setup=(("file", "v.yaml", tab_sep),),
        ),
        case(
            "a4-validate-tab-indentation",
            4,
            ["validate", "v.yaml"],
            {1},
            "a tab as indentation stays refused",
            setup=(("file", "v.yaml", GOOD.replace("  type: vllm", "\ttype: vllm")),),
        ),
        case(
            "a4-validate-set-True",
            4,
            ["validate", "{values}", "--set", f"{pool}.enabled=True"],
            {0},
            "--set x=True (helm reads a boolean)",
        ),
        case(
            "a4-validate-set-TRUE",
            4,
            ["validate", "{values}", "--set", f"{pool}.enabled=TRUE"],
            {0},
            "--set x=TRUE",
        ),
        case(
            "a4-validate-set-False",
            4,
            ["validate", "{values}", "--set", f"{pool}.hostIPC=False"],
            {0},
            "--set x=False",
        ),
        case(
            "a4-validate-set-Null",
            4,
            # A key whose null both accept (helm refuses a null hostIPC, and so does pdctl).
            ["validate", "{values}", "--set", "servingEngineSpec.tolerations=Null"],
            {0},
            "--set x=Null",
        ),
        case(
            "a4-template-set-True",
            4,
            ["template", "--summary", "{values}", "--set", f"{pool}.enabled=True"],
            {0},
            "template --set x=True",
        ),
        case(
            "a4-validate-nan",
            4,
            ["validate", "v.yaml"],
            {1},
            ".nan passes validate and helm refuses it",
            setup=(
                (
                    "file",
                    "v.yaml",
                    GOOD.replace("gpuMemoryUtilization: 0.9", "gpuMemoryUtilization: .nan", 1),
                ),
            ),
        ),
        case(
            "a4-validate-inf",
            4,
            ["validate", "v.yaml"],
            {1},
            ".inf as an integer",
            setup=(("file", "v.yaml", GOOD.replace("maxModelLen: 16384", "maxModelLen: .inf", 1)),),
        ),
        case(
            "a4-validate-negative-inf",
            4,
            ["validate", "v.yaml"],
            {1},
            "-.inf as a count",
            setup=(("file", "v.yaml", GOOD.replace("requestCPU: 8", "requestCPU: -.inf", 1)),),
        ),
        case(
            "a4-template-nan",
            4,
            ["template", "--summary", "-f", "v.yaml"],
            {1},
            "template with .nan",
            setup=(
                (
                    "file",
                    "v.yaml",
                    GOOD.replace("gpuMemoryUtilization: 0.9", "gpuMemoryUtilization: .nan", 1),
                ),
            ),
        ),
        case(
            "a4-validate-set-index-20000000",
            4,
            ["validate", "{values}", "--set", "servingEngineSpec.modelSpec[20000000].name=x"],
            {1, 2},
            "a --set index of 20,000,000 ran for minutes (helm refuses above 65536)",
        ),
        case(
            "a4-validate-set-index-70000",
            4,
            ["validate", "{values}", "--set", "servingEngineSpec.modelSpec[70000].name=x"],
            {1, 2},
            "a --set index above helm's bound",
        ),
        case(
            "a4-validate-set-index-negative",
            4,
            ["validate", "{values}", "--set", "servingEngineSpec.modelSpec[-1].name=x"],
            {1, 2},
            "a negative --set index",
        ),
        case(
            "a4-template-set-index-20000000",
            4,
            ["template", "{values}", "--set", "servingEngineSpec.modelSpec[20000000].name=x"],
            {1, 2},
            "template with a --set index of 20,000,000",
        ),
    ]


# ---- 5. servers --------------------------------------------------------------------------------

VERIFY = [
    "verify",
    "--url",
    "{server}",
    "--prefill-url",
    "{server}",
    "--decode-url",
    "{server}",
    "--timeout",
    "5",
    "--settle",
    "0",
]
BENCH = [
    "bench",
    "--url",
    "{server}",
    "--model",
    "m",
    "--requests",
    "2",
    "--input-len",
    "8",
    "--output-len",
    "4",
    "--timeout",
    "5",
]


def _servers() -> list[Case]:
    hung_engines: list[str] = []
    for _ in range(3):
        hung_engines += ["--prefill-url", "{server2}", "--decode-url", "{server2}"]
    key = ("--api-key-file", "key.txt")
    cases = [
        case(
            "a5-verify-hung-engines",
            5,
            ["verify", "--url", "{server}", *hung_engines, "--timeout", "3", "--settle", "0"],
            {1},
            "six hung engines cost one timeout each, in series",
            servers=(("server", "ok"), ("server2", "hang")),
            deadline=60,
        ),
        case(
            "a5-verify-hung-router",
            5,
            [*VERIFY[:-4], "--timeout", "3", "--settle", "0"],
            {1},
            "a router and engines that never answer",
            servers=(("server", "hang"),),
            deadline=60,
        ),
        case(
            "a5-bench-hung",
            5,
            [*BENCH[:-2], "--timeout", "3"],
            {1},
            "bench against a router that never answers",
            servers=(("server", "hang"),),
            deadline=60,
        ),
        case(
            "a5-verify-closes",
            5,
            VERIFY,
            {1},
            "every connection closed at once",
            servers=(("server", "close"),),
            deadline=60,
        ),
        case(
            "a5-bench-all-fail",
            5,
            BENCH,
            {1},
            "bench exited 0 when every request failed",
            servers=(("server", "fail"),),
            deadline=60,
        ),
        case(
            "a5-bench-all-401",
            5,
            BENCH,
            {1},
            "bench against a router that wants a key",
            servers=(("server", "auth"),),
            deadline=60,
        ),
        case(
            "a5-verify-401",
            5,
            VERIFY,
            {1},
            "verify against a router that wants a key",
            servers=(("server", "auth"),),
            deadline=60,
        ),
        case(
            "a5-verify-api-key-file",
            5,
            [*VERIFY, *key],
            {0, 1},
            "verify sends the key of --api-key-file",
            setup=(KEY_FILE,),
            servers=(("server", "auth"),),
            authorized=True,
            deadline=60,
        ),
        case(
            "a5-bench-api-key-file",
            5,
            [*BENCH, *key],
            {0, 1},
            "bench sends the key of --api-key-file",
            setup=(KEY_FILE,),
            servers=(("server", "auth"),),
            authorized=True,
            deadline=60,
        ),
        case(
            "a5-verify-api-key-env",
            5,
            VERIFY,
            {0, 1},
            "verify sends $VLLM_API_KEY",
            env=(("VLLM_API_KEY", API_KEY),),
            servers=(("server", "auth"),),
            authorized=True,
            deadline=60,
        ),
        case(
            "a5-bench-api-key-env",
            5,
            BENCH,
            {0, 1},
            "bench sends $VLLM_API_KEY",
            env=(("VLLM_API_KEY", API_KEY),),
            servers=(("server", "auth"),),
            authorized=True,
            deadline=60,
        ),
        case(
            "a5-verify-url-file-scheme",
            5,
            ["verify", "--url", "file:///etc/passwd"],
            {1, 2},
            "a --url that is no HTTP URL",
        ),
        case(
            "a5-verify-url-bad-port",
            5,
            ["verify", "--url", "http://127.0.0.1:99999"],
            {1, 2},
            "a --url with a port out of range",
        ),
        case(
            "a5-verify-unreachable",
            5,
            ["verify", "--url", CLOSED, "--timeout", "3"],
            {1},
            "a router that refuses connections",
        ),
    ]
    for mode, what in (
        ("drip-sse", "an SSE comment every second, never an event (--timeout was per read)"),
        ("drip-body", "one byte of the body every second"),
        ("endless-models", "an endless /v1/models body"),
        ("endless-metrics", "an endless /metrics page"),
        ("endless-error", "an endless body on HTTP 500"),
        ("endless-sse", "events as fast as they are read, forever"),
    ):
        cases.append(
            case(
                f"a5-verify-{mode}",
                5,
                VERIFY,
                {1},
                f"verify: {what}",
                servers=(("server", mode),),
                deadline=60,
            )
        )
    for mode in ("drip-sse", "endless-models", "endless-error", "endless-sse"):
        cases.append(
            case(
                f"a5-bench-{mode}",
                5,
                # Without --model, bench reads the model from /v1/models first.
                BENCH[:3] + BENCH[5:] if mode == "endless-models" else BENCH,
                {1},
                f"bench: the {mode} server",
                servers=(("server", mode),),
                deadline=60,
            )
        )
    return cases


# ---- 6. secrets and control characters -------------------------------------------------------

_TOKEN_POOL = values(pool0=f"      hf_token: {HF_TOKEN}\n")


def _secret(name: str, pool0: str = "", top: str = "") -> Step:
    return ("file", name, values(pool0=pool0, top=top))


def _secrets() -> list[Case]:
    token = ("file", "token-values.yaml", _TOKEN_POOL)
    wrong = _secret("wrong-values.yaml", pool0=f"      hf_token: [{WRONG_TYPED}]\n")
    extra = _secret(
        "extra-values.yaml",
        pool0=f"      hf_token: {{secretName: a, secretKey: b, token: {EXTRA_KEY}}}\n",
    )
    api_wrong = _secret("api-values.yaml", top=f"  vllmApiKey: [{API_KEY}]\n")
    api = _secret("api-values.yaml", top=f"  vllmApiKey: {API_KEY}\n")
    pw_extra = _secret(
        "pw-values.yaml",
        pool0="      env:\n        - name: DB_PASSWORD\n"
        f"          value: {PASSWORD}\n          bogus: 1\n",
    )
    pw_list = _secret(
        "pw-values.yaml",
        pool0=f"      env:\n        - name: DB_PASSWORD\n          value: [{PASSWORD}]\n",
    )
    env_token = _secret(
        "env-values.yaml",
        pool0="      env:\n        - name: MY_TOKEN\n"
        f"          value: {ENV_TOKEN}\n"
        "          valueFrom: {secretKeyRef: {name: a, key: b}}\n",
    )
    cases = [
        case(
            "a6-validate-token-with-xxx",
            6,
            ["validate", "token-values.yaml"],
            {0},
            "a real token containing xxx was called a placeholder and printed whole",
            setup=(token,),
        ),
        case(
            "a6-validate-token-with-xxx-github",
            6,
            ["validate", "-o", "github", "token-values.yaml"],
            {0},
            "the same as GitHub annotations",
            setup=(token,),
        ),
        case(
            "a6-validate-token-with-xxx-json",
            6,
            ["validate", "-o", "json", "token-values.yaml"],
            {0},
            "the same as JSON",
            setup=(token,),
        ),
        case(
            "a6-template-token-summary",
            6,
            ["template", "--summary", "-f", "token-values.yaml"],
            {0},
            "template's warnings print the token",
            setup=(token,),
        ),
        case(
            "a6-template-token-output-dir",
            6,
            ["template", "-f", "token-values.yaml", "--output-dir", "out"],
            {0},
            "template --output-dir prints only a summary line",
            setup=(token,),
        ),
        case(
            "a6-template-token-set",
            6,
            [
                "template",
                "--summary",
                "{values}",
                "--set",
                f"servingEngineSpec.modelSpec[0].hf_token={HF_TOKEN}",
            ],
            {0},
            "a token given with --set",
        ),
        case(
            "a6-deploy-dry-run-token",
            6,
            ["deploy", "--dry-run", "-f", "token-values.yaml"],
            {0},
            "deploy --dry-run output names no token",
            setup=(token,),
        ),
        case(
            "a6-deploy-dry-run-api-key",
            6,
            ["deploy", "--dry-run", "-f", "api-values.yaml"],
            {0},
            "deploy --dry-run output names no API key",
            setup=(api,),
        ),
        case(
            "a6-deploy-unreachable-token",
            6,
            ["deploy", "-f", "token-values.yaml"],
            {1, 3},
            "deploy with no cluster (its messages name no token)",
            setup=(token,),
            deadline=60,
        ),
        case(
            "a6-validate-token-wrong-type",
            6,
            ["validate", "wrong-values.yaml"],
            {1},
            "a schema error echoes a token given as a list",
            setup=(wrong,),
        ),
        case(
            "a6-validate-token-wrong-type-github",
            6,
            ["validate", "-o", "github", "wrong-values.yaml"],
            {1},
            "the same as GitHub annotations",
            setup=(wrong,),
        ),
        case(
            "a6-validate-token-extra-key",
            6,
            ["validate", "extra-values.yaml"],
            {1},
            "a schema error echoes the mapping that holds a token",
            setup=(extra,),
        ),
        case(
            "a6-validate-api-key-wrong-type",
            6,
            ["validate", "-o", "json", "api-values.yaml"],
            {1},
            "vllmApiKey given as a list",
            setup=(api_wrong,),
        ),
        case(
            "a6-validate-env-password-extra-key",
            6,
            ["validate", "pw-values.yaml"],
            {1},
            "an env entry named *_PASSWORD with an unknown key",
            setup=(pw_extra,),
        ),
        case(
            "a6-validate-env-password-wrong-type",
            6,
            ["validate", "pw-values.yaml"],
            {1},
            "an env *_PASSWORD value given as a list",
            setup=(pw_list,),
        ),
        case(
            "a6-validate-env-token-value-and-from",
            6,
            ["validate", "env-values.yaml"],
            {0, 1},
            "an env *_TOKEN entry with both value and valueFrom",
            setup=(env_token,),
        ),
        case(
            "a6-template-skip-validation-wrong-type",
            6,
            ["template", "--skip-validation", "-f", "wrong-values.yaml"],
            {1},
            "helm's own error for a token given as a list",
            setup=(wrong,),
        ),
        case(
            "a6-helm-stderr-echoes-values",
            6,
            ["template", "-f", "token-values.yaml", "--helm", "{work}/fake-helm"],
            {1, 3},
            "helm's stderr passed through (this fake helm echoes the values it got)",
            setup=(token, ("helm", "fake-helm", "echo-values")),
        ),
        case(
            "a6-verify-show-curl-api-key",
            6,
            [*VERIFY, "--show-curl", "--api-key-file", "key.txt"],
            {0, 1},
            "--show-curl prints the requests without the key",
            setup=(KEY_FILE,),
            servers=(("server", "auth"),),
            deadline=60,
        ),
        case(
            "a6-control-escape-in-value",
            6,
            ["validate", "ctl.yaml"],
            {1},
            'an ESC written as "\\e" in a quoted value reaches the terminal in a finding',
            setup=(
                (
                    "file",
                    "ctl.yaml",
                    GOOD.replace("name: qwen-prefill", 'name: "a\\e[2J\\e]0;pwned\\ab"'),
                ),
            ),
        ),
        case(
            "a6-control-escape-in-value-github",
            6,
            ["validate", "-o", "github", "ctl.yaml"],
            {1},
            "the same as GitHub annotations",
            setup=(("file", "ctl.yaml", GOOD.replace("name: qwen-prefill", 'name: "a\\e[2Jb"')),),
        ),
        case(
            "a6-control-escape-in-set",
            6,
            ["validate", "{values}", "--set", "servingEngineSpec.modelSpec[0].name=a\x1b[2Jb"],
            {1},
            "an ESC in a --set value",
        ),
        case(
            "a6-control-escape-in-file-name",
            6,
            ["validate", "e\x1b[2J-values.yaml"],
            {1},
            "a file name with an ESC sequence",
            setup=(("file", "e\x1b[2J-values.yaml", "a: 1\n"),),
        ),
        case(
            "a6-control-newline-in-file-name",
            6,
            ["validate", "-o", "github", "n\n::error::forged-values.yaml"],
            {1},
            "a file name with a newline forges an annotation",
            setup=(("file", "n\n::error::forged-values.yaml", "a: 1\n"),),
            forbid=("\n::error::forged",),
        ),
        case(
            "a6-control-verify-server",
            6,
            VERIFY,
            {1},
            "a server whose model name and errors carry ESC sequences",
            servers=(("server", "control"),),
            deadline=60,
        ),
    ]
    return cases


# ---- 7. state ----------------------------------------------------------------------------------

STALE = (
    ("dir", "out"),
    ("file", "out/stale.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: stale\n"),
)
HUNG_KUBECONFIG = (
    "file",
    "hung-kubeconfig",
    """apiVersion: v1
kind: Config
clusters:
- name: hung
  cluster: {server: "{server}"}
users:
- name: u
  user: {token: not-a-secret}
contexts:
- name: hung
  context: {cluster: hung, user: u, namespace: default}
current-context: hung
""",
)


def _state() -> list[Case]:
    hang = ("helm", "fake-helm", "hang-version")
    slow = ("helm", "fake-helm", "slow-template")
    fake = ("--helm", "{work}/fake-helm")
    # The signal cases plant an API key, which no warning quotes: the temporary copy is what leaks.
    keyed = ("file", "api-values.yaml", values(top=f"  vllmApiKey: {API_KEY}\n"))
    hung_api = {
        "servers": (("server", "hang"),),
        "setup": (HUNG_KUBECONFIG,),
        "env": (("KUBECONFIG", "{work}/hung-kubeconfig"),),
        "deadline": 90.0,
    }
    state = "home/.local/state/pdctl/local"
    cases = [
        case(
            "a7-up-state-lock-symlink",
            7,
            [*UP, "render"],
            {1},
            "a symlink placed in up's state folder is followed: up writes where it points",
            setup=(
                ("dir", "render"),
                _engine_render(),
                ("dir", f"{state}/pd"),
                ("link", f"{state}/pd/lock", "{work}/victim"),
            ),
            absent=("victim",),
            show=("a symbolic link",),
        ),
        case(
            "a7-up-state-partial-symlink",
            7,
            [*UP, "render"],
            {1},
            "a symlink at the state file's staging name: up writes through it",
            setup=(
                ("dir", "render"),
                _engine_render(),
                ("dir", f"{state}/pd"),
                ("link", f"{state}/pd/.layout.json.partial", "{work}/victim"),
            ),
            absent=("victim",),
            show=("a symbolic link",),
        ),
        case(
            "a7-up-state-folder-symlink",
            7,
            [*UP, "render"],
            {1},
            "the release's state folder is a symlink to another folder",
            setup=(
                ("dir", "render"),
                _engine_render(),
                ("dir", "elsewhere"),
                ("dir", state),
                ("link", f"{state}/pd", "{work}/elsewhere"),
            ),
            absent=("elsewhere/lock",),
            show=("a symbolic link",),
        ),
        case(
            "a7-output-dir-stale",
            7,
            ["template", "{values}", "--output-dir", "out"],
            {1, 2},
            "a reused --output-dir keeps stale files that the summary counts",
            setup=STALE,
        ),
        case(
            "a7-output-dir-force",
            7,
            ["template", "{values}", "--output-dir", "out", "--force"],
            {0},
            "--force replaces the folder's contents",
            setup=STALE,
            absent=("out/stale.yaml",),
        ),
        case(
            "a7-output-dir-is-a-file",
            7,
            ["template", "{values}", "--output-dir", "o.txt"],
            {1, 2},
            "--output-dir names a file",
            setup=(("file", "o.txt", "x\n"),),
        ),
        case(
            "a7-helm-hangs-on-version-template",
            7,
            ["template", "{values}", *fake],
            {3},
            "a helm that hangs on `version` hangs pdctl",
            setup=(hang,),
            deadline=60,
        ),
        case(
            "a7-helm-hangs-on-version-env",
            7,
            ["validate", "--render", "{values}"],
            {3},
            "the same helm found through $PDCTL_HELM",
            setup=(hang,),
            env=(("PDCTL_HELM", "{work}/fake-helm"),),
            deadline=60,
        ),
        case(
            "a7-helm-hangs-on-version-deploy",
            7,
            ["deploy", "--dry-run", "-f", "{values}", *fake],
            {3},
            "deploy --dry-run with that helm",
            setup=(hang,),
            deadline=60,
        ),
        case(
            "a7-helm-hangs-on-version-version",
            7,
            ["version", *fake],
            {0, 3},
            "pdctl version with that helm",
            setup=(hang,),
            deadline=60,
        ),
        case(
            "a7-helm-hangs-on-version-status",
            7,
            ["status", *fake],
            {3},
            "status with that helm",
            setup=(hang,),
            deadline=60,
        ),
        case(
            "a7-sigterm-during-template",
            7,
            ["template", "api-values.yaml", *fake],
            TERMINATED,
            "SIGTERM leaves helm running and the merged values (API key) on disk",
            setup=(keyed, slow),
            signal="TERM",
            deadline=60,
        ),
        case(
            "a7-sigint-during-template",
            7,
            ["template", "api-values.yaml", *fake],
            TERMINATED,
            "SIGINT (Ctrl-C) during helm template",
            setup=(keyed, slow),
            signal="INT",
            deadline=60,
        ),
        case(
            "a7-sigterm-during-validate-render",
            7,
            ["validate", "--render", "api-values.yaml", *fake],
            TERMINATED,
            "SIGTERM during validate --render",
            setup=(keyed, slow),
            signal="TERM",
            deadline=60,
        ),
        case(
            "a7-sigterm-during-deploy-dry-run",
            7,
            ["deploy", "--dry-run", "-f", "api-values.yaml", *fake],
            TERMINATED,
            "SIGTERM during deploy --dry-run",
            setup=(keyed, slow),
            signal="TERM",
            deadline=60,
        ),
        case(
            "a7-tag-latest-validate",
            7,
            ["validate", "v.yaml"],
            {0},
            "tag: latest gets no warning though the version checks read the tag",
            setup=(("file", "v.yaml", values(tag="latest")),),
            show=("latest",),
        ),
        case(
            "a7-tag-latest-template",
            7,
            ["template", "-f", "v.yaml", "--output-dir", "out"],
            {0},
            "template warns about tag: latest",
            setup=(("file", "v.yaml", values(tag="latest")),),
            show=("latest",),
        ),
        case(
            "a7-deploy-unreachable",
            7,
            ["deploy", "-f", "{values}"],
            {3},
            "deploy with a cluster that refuses connections",
            deadline=60,
        ),
        case(
            "a7-deploy-hung-api",
            7,
            ["deploy", "-f", "{values}"],
            {3},
            "deploy against an API server that accepts and never answers",
            **hung_api,
        ),
        case(
            "a7-status-hung-api",
            7,
            ["status"],
            {3},
            "status against an API server that never answers",
            **hung_api,
        ),
        case(
            "a7-uninstall-hung-api",
            7,
            ["uninstall"],
            {3},
            "uninstall against an API server that never answers",
            **hung_api,
        ),
        case(
            "a7-init-out-exists",
            7,
            ["init", "-m", "llama-3.1-8b", "--gpus", "2", "--offline", "--out", "o.yaml"],
            {1, 2},
            "init keeps an existing file without --force",
            setup=(("file", "o.yaml", "keep: me\n"),),
        ),
        case(
            "a7-init-out-fifo",
            7,
            [
                "init",
                "-m",
                "llama-3.1-8b",
                "--gpus",
                "2",
                "--offline",
                "--out",
                "fifo-values.yaml",
                "--force",
            ],
            {1, 2},
            "init --out names a FIFO (writing it blocks)",
            setup=(FIFO,),
        ),
    ]
    return cases


# ---- 8. the local release: pdctl down and the simulator ------------------------------------------


def _local() -> list[Case]:
    def client(name: str, argv: list[str], note: str, deadline: float = 60.0) -> Case:
        return case(f"a8-{name}", 8, argv, {0}, note, script=argv[0], deadline=deadline)

    malformed = {
        "list": "a body that is a JSON list (used to close the connection, with a traceback)",
        "null": "a body that is JSON null",
        "not-json": "a body that is not JSON",
        "max-tokens-abc": 'max_tokens "abc" (used to close the connection, with a traceback)',
        "max-tokens-nan": "max_tokens NaN",
        "max-tokens-negative": "max_tokens -5 (used to answer 200 with completion_tokens -5)",
        "max-tokens-zero": "max_tokens 0, which vLLM refuses (used to mean 16)",
        "kv-params-list": "kv_transfer_params that is a list",
    }
    cases = [
        client(f"sim-{kind}", ["malformed", kind], f"the simulator: {note}: vLLM's 400 JSON")
        for kind, note in malformed.items()
    ]
    cases += [
        client(
            "sim-oversized-body",
            ["oversized-body"],
            "the simulator: Content-Length 10^9 and nothing sent: 413, not a held connection",
        ),
        client(
            "sim-slow-body",
            ["slow-body"],
            "the simulator: 10 bytes of a 1,000-byte body, then a stall: dropped after 30 s",
            deadline=90.0,
        ),
        client(
            "sim-idle-connection",
            ["idle-connection"],
            "the simulator: an idle kept-alive connection is closed (VLLM_HTTP_TIMEOUT_KEEP_ALIVE)",
        ),
        client(
            "sim-abandoned-streams",
            ["abandoned-streams"],
            "the simulator: 50 streams abandoned after their first event are aborted (350 used "
            "to wedge the decode engine)",
            deadline=120.0,
        ),
        client(
            "sim-refused-prompts",
            ["refused-prompts"],
            "the simulator: 4 MB prompts it refuses are not kept (50 took it from 27 to 260 MB)",
            deadline=120.0,
        ),
        client(
            "sim-bench-interrupted",
            ["bench-interrupted"],
            "pdctl bench stopped with Ctrl-C: the simulator aborts its requests (the next bench "
            "used to measure a loaded engine)",
            deadline=120.0,
        ),
        client(
            "down-stale-state",
            ["down-stale-state"],
            "pdctl down over a state whose pids another program holds now (a supervisor killed "
            "with SIGKILL, pids reused): that program lives",
        ),
        client(
            "down-racing-up",
            ["down-racing-up"],
            "pdctl down while pdctl up renders: both end cleanly (no traceback, no endless wait "
            "on the lock) and the release does not come up",
            deadline=90.0,
        ),
        client(
            "down-after-kill",
            ["down-after-kill"],
            "pdctl up, SIGKILL to its supervisor: status says dead, not ready; down stops what "
            "is left and the state says stopped",
            deadline=120.0,
        ),
    ]
    return cases


# ---- 9. pdctl up runs files as code --------------------------------------------------------------

# `pdctl up` in the foreground on the simulator: a case that up refuses ends at once; one that it
# ran (before the fix) runs until the deadline kills its group, whose processes die with it
# (PR_SET_PDEATHSIG), or touches {marker}.
UP = ("up", "--engine", "sim", "--foreground", "--timeout", "20")
EVIL_SITE = (("dir", "evil"), ("file", "evil/sitecustomize.py", "open('{marker}', 'w').close()\n"))


def _engine_render(command: str = "[vllm]", extra: str = "") -> Step:
    """A rendered folder (`pdctl template --output-dir`, written by hand: bypassing the chart's
    checks) of one engine, pool `solo`, whose model the simulator does not know, so that an engine
    up starts exits at once and up ends with exit 1."""
    deployment = f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: pd-solo-deployment-vllm
  labels: {{app.kubernetes.io/instance: pd}}
spec:
  replicas: 1
  template:
    metadata:
      labels: {{app.kubernetes.io/component: serving-engine, model: solo}}
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.33.0
          command: {command}
          args: [serve, no-such/model{extra}]
"""
    return ("file", "render/deployment.yaml", deployment)


def _up_values(name: str, pool0: str = "", tail: str = "") -> Step:
    return ("file", name, values(pool0=pool0) + tail)


def _up_env(name: str, value: str) -> str:
    return f"      env:\n        - name: {name}\n          value: {value}\n"


def _up_files() -> list[Case]:
    render = (("dir", "render"),)
    cases = [
        case(
            f"a9-up-env-{name.lower().replace('_', '-')}",
            9,
            [*UP, "env-values.yaml"],
            {1},
            f"servingEngineSpec.modelSpec[].env {name} {why}",
            setup=(*EVIL_SITE, _up_values("env-values.yaml", _up_env(name, value))),
            show=(f"--allow-env {name}",),
            deadline=40.0,
        )
        for name, value, why in (
            ("PYTHONPATH", "{work}/evil", "runs the folder's sitecustomize.py in the engines"),
            ("PATH", "{work}/evil", "puts another vllm first"),
            ("VLLM_LOGGING_CONFIG_PATH", "{work}/evil/log.json", "a dictConfig names any class"),
        )
    ]
    cases += [
        case(
            "a9-up-router-env-ld-preload",
            9,
            [*UP, "env-values.yaml"],
            {1},
            "routerSpec.env LD_PRELOAD runs a library's constructor in the router",
            setup=(
                _up_values(
                    "env-values.yaml",
                    tail="  env:\n    - name: LD_PRELOAD\n      value: /tmp/evil.so\n",
                ),
            ),
            show=("--allow-env LD_PRELOAD",),
            deadline=40.0,
        ),
        case(
            "a9-up-rendered-command-shell",
            9,
            [*UP, "render"],
            {1},
            "a rendered Deployment's command: [/bin/sh, -c, ...] runs that shell",
            setup=(*render, _engine_render('[/bin/sh, -c, "touch {marker}"]')),
            show=("--allow-command",),
        ),
        case(
            "a9-up-rendered-other-vllm",
            9,
            [*UP, "render"],
            {1},
            "a rendered command naming another vllm executable",
            setup=(*render, _engine_render("[{work}/evil/vllm]")),
            show=("--allow-command",),
        ),
        case(
            "a9-up-rendered-host-prefix",
            9,
            [*UP, "render"],
            {1},
            "--hos 0.0.0.0 (an argparse prefix) in a rendered folder made the engine listen on "
            "every interface while up printed 127.0.0.1",
            setup=(*render, _engine_render(extra=", --hos, 0.0.0.0")),
            show=("--host 127.0.0.1 --port",),
            forbid=("--hos 0.0.0.0",),
        ),
        case(
            "a9-up-rendered-host-equals",
            9,
            [*UP, "render"],
            {1},
            "--host=0.0.0.0 in a rendered folder",
            setup=(*render, _engine_render(extra=", --host=0.0.0.0")),
            show=("--host 127.0.0.1 --port",),
            forbid=("--host=0.0.0.0",),
        ),
        case(
            "a9-up-middleware",
            9,
            [*UP, "render"],
            {1},
            "--middleware imports a module into the engine",
            setup=(*render, _engine_render(extra=", --middleware, evil.mw")),
            show=("--allow-code-flag middleware",),
        ),
        case(
            "a9-up-kv-connector-module-path",
            9,
            [*UP, "render"],
            {1},
            "kv_connector_module_path in the transfer config imports a module",
            setup=(
                *render,
                _engine_render(extra=", --kv-transfer-config.kv_connector_module_path, evil"),
            ),
            show=("--allow-code-flag kv-connector-module-path",),
        ),
        case(
            "a9-up-tool-parser-plugin",
            9,
            [*UP, "render"],
            {1},
            "--tool_parser_plugin=FILE (underscores, =) imports a file",
            setup=(*render, _engine_render(extra=", --tool_parser_plugin=/tmp/p.py")),
            show=("--allow-code-flag tool-parser-plugin",),
        ),
        case(
            "a9-up-pool-named-router",
            9,
            [*UP, "render"],
            {1},
            "a pool named router shares the router's log and loses a pid",
            setup=(
                *render,
                ("file", "render/deployment.yaml", _engine_render()[2].replace("solo", "router")),
            ),
            show=("'router' is its own",),
        ),
        case(
            "a9-up-pool-named-supervisor",
            9,
            [*UP, "render"],
            {1},
            "a pool named supervisor shares the supervisor's log",
            setup=(
                *render,
                (
                    "file",
                    "render/deployment.yaml",
                    _engine_render()[2].replace("solo", "supervisor"),
                ),
            ),
            show=("'supervisor' is its own",),
        ),
    ]
    return cases


CASES: list[Case] = [
    *_names(),
    *_files(),
    *_tracebacks(),
    *_helm_forms(),
    *_servers(),
    *_secrets(),
    *_state(),
    *_local(),
    *_up_files(),
]
