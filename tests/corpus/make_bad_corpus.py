# ruff: noqa: E501
"""Generator of tests/corpus/bad (run from the repo root): the tutorial values, one defect each.

The files are committed; rerun this only to change the corpus. Each file starts with
`# expect: RULE path` (or `# expect: RULE line N` for YAML errors) and optionally `# args: ...`.
"""

from pathlib import Path

BASE = Path("tutorials/assets/values-16-disagg-prefill.yaml").read_text()
BASE = BASE.replace(
    "hf_token: <your-hf-token>", "hf_token: {secretName: hf-token, secretKey: token}"
)
OUT = Path("tests/corpus/bad")


def nth_replace(text, old, new, n=1):
    idx = -1
    for _ in range(n):
        idx = text.index(old, idx + 1)
    return text[:idx] + new + text[idx + len(old) :]


P = "servingEngineSpec.modelSpec"
cases = {}


def case(name, expect, text, args=None, line_of=None):
    header = ""
    body = text
    if line_of is not None:
        # line number in the final file (header lines come first)
        nheader = 1 + (1 if args else 0)
        line = body[: body.index(line_of)].count("\n") + 1 + nheader
        expect = f"{expect} line {line}"
    header = f"# expect: {expect}\n" + (f"# args: {args}\n" if args else "")
    cases[name] = header + body


# ---- YAML
case(
    "yaml-unclosed-bracket",
    "YAML001",
    BASE.replace(
        '  extraArgs:\n    - "--prefill-model-labels"',
        '  extraArgs: ["--prefill-model-labels"\n    - "x"',
        1,
    ),
    line_of='    - "x"',
)
case(
    "yaml-duplicate-key",
    "YAML002",
    nth_replace(
        BASE, "      replicaCount: 1\n", "      replicaCount: 1\n      replicaCount: 2\n", 2
    ),
    line_of="      replicaCount: 2",
)
case(
    "yaml-tab-indent",
    "YAML004",
    BASE.replace('  tag: "pd-05-26"', '\ttag: "pd-05-26"'),
    line_of='\ttag: "pd-05-26"',
)
bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 9) + "]\n"
    for i in range(8)
)
case("yaml-alias-bomb", "YAML003", bomb)
cases["yaml-empty"] = "# expect: YAML006\n"
case("yaml-top-level-list", "YAML006", "- servingEngineSpec: {}\n", line_of="- servingEngineSpec")
case("yaml-two-documents", "YAML001", BASE + "---\nrouterSpec: {}\n", line_of="---\nrouterSpec")
case(
    "yaml-bad-indent",
    "YAML001",
    BASE.replace("  containerPort: 8000\n  modelSpec:", "  containerPort: 8000\n   modelSpec:", 1),
    line_of="   modelSpec:",
)
# ---- schema
case(
    "schema-unknown-key",
    f"SCHEMA {P}[0].replicCount",
    nth_replace(BASE, "replicaCount: 1", "replicCount: 1"),
)
case(
    "schema-enum",
    "SCHEMA routerSpec.routingLogic",
    BASE.replace('routingLogic: "disaggregated_prefill"', 'routingLogic: "disaggregated"'),
)
case(
    "schema-type",
    f"SCHEMA {P}[1].replicaCount",
    nth_replace(BASE, "replicaCount: 1", 'replicaCount: "one"', 2),
)
case(
    "schema-port-range",
    f"SCHEMA {P}[1].lmcacheConfig.nixlPeerPort",
    nth_replace(BASE, 'nixlPeerPort: "55555"', "nixlPeerPort: 70000", 2),
)
case(
    "schema-pattern-name",
    f"SCHEMA {P}[0].name",
    BASE.replace('name: "llama-prefill"', 'name: "Llama_Prefill"'),
)
case(
    "schema-required-model",
    f"SCHEMA {P}[0].modelURL",
    nth_replace(BASE, '      modelURL: "meta-llama/Llama-3.1-8B-Instruct"\n', ""),
)
case(
    "schema-memory-utilization",
    f"SCHEMA {P}[0].vllmConfig.gpuMemoryUtilization",
    nth_replace(
        BASE,
        "        maxModelLen: 32000\n",
        "        maxModelLen: 32000\n        gpuMemoryUtilization: 1.5\n",
    ),
)
case("schema-unknown-top-level", "SCHEMA routerSpecs", BASE.replace("routerSpec:", "routerSpecs:"))
case(
    "schema-nixl-needs-peer",
    f"SCHEMA {P}[0].lmcacheConfig.nixlPeerHost",
    BASE.replace('        nixlPeerHost: "pd-llama-decode-engine-service"\n', ""),
)
case(
    "schema-tp-zero",
    f"SCHEMA {P}[1].vllmConfig.tensorParallelSize",
    nth_replace(
        BASE,
        "        maxModelLen: 32000\n",
        "        maxModelLen: 32000\n        tensorParallelSize: 0\n",
        2,
    ),
)
case(
    "schema-kvrole-enum",
    f"SCHEMA {P}[1].lmcacheConfig.kvRole",
    BASE.replace('kvRole: "kv_consumer"', 'kvRole: "consumer"'),
)
# ---- PD rules
case(
    "pd001-sender-role",
    f"PD001 {P}[0].lmcacheConfig.nixlRole",
    BASE.replace('nixlRole: "sender"', 'nixlRole: "receiver"'),
)
case(
    "pd001-nixl-without-lmcache",
    f"PD001 {P}[1].lmcacheConfig.enableNixl",
    nth_replace(BASE, "        enabled: true\n", "        enabled: false\n", 2),
)
case(
    "pd001-no-consumer",
    f"PD001 {P}[0].lmcacheConfig.kvRole",
    BASE.replace('kvRole: "kv_consumer"', 'kvRole: "kv_producer"'),
)
case(
    "pd003-unknown-service",
    f"PD003 {P}[0].lmcacheConfig.nixlPeerHost",
    BASE.replace('"pd-llama-decode-engine-service"', '"pd-llama-decoder-engine-service"'),
)
case(
    "pd003-points-at-prefill",
    f"PD003 {P}[0].lmcacheConfig.nixlPeerHost",
    BASE.replace(
        '"pd-llama-decode-engine-service"', '"pd-llama-prefill-engine-service.default.svc"'
    ),
)
case("pd003-other-release", f"PD003 {P}[0].lmcacheConfig.nixlPeerHost", BASE, args="--release prod")
case(
    "pd004-port-mismatch",
    f"PD004 {P}[0].lmcacheConfig.nixlPeerPort",
    nth_replace(BASE, 'nixlPeerPort: "55555"', 'nixlPeerPort: "55556"', 2),
)
case(
    "pd005-model-mismatch",
    f"PD005 {P}[1].modelURL",
    nth_replace(
        BASE,
        'modelURL: "meta-llama/Llama-3.1-8B-Instruct"',
        'modelURL: "meta-llama/Llama-3.1-70B-Instruct"',
        2,
    ),
)
case(
    "pd005-max-model-len",
    f"PD005 {P}[1].vllmConfig.maxModelLen",
    nth_replace(BASE, "maxModelLen: 32000", "maxModelLen: 16000", 2),
)
case(
    "pd006-duplicate-pool",
    f"PD006 {P}[1].name",
    BASE.replace('name: "llama-decode"', 'name: "llama-prefill"'),
)
case(
    "pd007-name-too-long",
    f"PD007 {P}[0].name",
    BASE,
    args="--release a-rather-long-release-name-for-this-cluster",
)
case(
    "pd008-unknown-label",
    "PD008 routerSpec.extraArgs[3]",
    BASE.replace('    - "llama-decode"', '    - "llama-decoder"'),
)
case(
    "pd008-wrong-role",
    "PD008 routerSpec.extraArgs[1]",
    BASE.replace('    - "llama-prefill"\n', '    - "llama-decode"\n'),
)
case(
    "pd008-missing-decode-labels",
    "PD008 routerSpec.extraArgs",
    BASE.replace('    - "--decode-model-labels"\n    - "llama-decode"\n', ""),
)
case(
    "pd009-roundrobin-with-pd",
    "PD009 routerSpec.routingLogic",
    BASE.replace('"disaggregated_prefill"', '"roundrobin"'),
)
case(
    "pd010-gpus-vs-tp",
    f"PD010 {P}[1].requestGPU",
    nth_replace(
        BASE,
        "        maxModelLen: 32000\n",
        "        maxModelLen: 32000\n        tensorParallelSize: 2\n",
        2,
    ),
)
case(
    "pd012-v0-engine",
    f"PD012 {P}[1].vllmConfig.v1",
    nth_replace(BASE, "        v1: 1\n", "        v1: 0\n", 2),
)
case(
    "pd014-legacy-replicas",
    f"PD014 {P}[1].replicaCount",
    nth_replace(BASE, "replicaCount: 1", "replicaCount: 2", 2),
)
case(
    "pd015-model-label",
    f"PD015 {P}[1].labels.model",
    BASE.replace('        model: "llama-decode"', '        model: "decode"'),
)

for old in OUT.glob("*.yaml"):
    old.unlink()
for name, text in cases.items():
    (OUT / f"{name}.yaml").write_text(text)
print(len(cases))
