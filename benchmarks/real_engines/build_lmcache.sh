#!/usr/bin/env bash
# Build LMCache from its source release against the torch of the machine it runs on (the GPU host:
# torch 2.11.0+cu130, nvcc 13.0), as a wheel. LMCache's PyPI wheels link their compiled ops
# against the torch of their own build (0.5.6: torch 2.13), which fails on torch 2.11 with
# "undefined symbol ... c10::NotImplementedError".
#
#   fetch (where PyPI is):  benchmarks/real_engines/build_lmcache.sh fetch DIR
#   build (on the GPU host): benchmarks/real_engines/build_lmcache.sh build DIR [OUT]
#
# `fetch` puts the sdist and the build's own wheels in DIR (the GPU host has no network, so DIR
# travels there). `build` installs those wheels beside the host's Python (PYTHONPATH), unpacks the
# sdist in /tmp and runs `pip wheel --no-build-isolation` there: no build isolation, so the ops
# compile against the host's torch and not the torch 2.13 that LMCache's pyproject.toml pins for
# its own builds. Hopper only (TORCH_CUDA_ARCH_LIST=9.0), 16 compile jobs (the H200 host's cores).
set -euo pipefail

VERSION=${LMCACHE_VERSION:-0.5.6}
# The sdist's sha256 as the package index lists it (lmcache-0.5.6.tar.gz, uploaded 2026-10-15).
SHA256=${LMCACHE_SHA256:-d6951e60ce8818a76aa42d0866a4ba85f1c95cd919355fff30ff24dcc3243f1e}
# What LMCache's build needs beyond the host's image (its pyproject.toml [build-system] and
# requirements/build.txt, less torch, ninja and wheel, which the image has): setuptools within
# LMCache's range, setuptools_scm (the version, from the sdist's PKG-INFO), grpcio-tools (build_py
# generates LMCache's gRPC stubs) and the grpcio/protobuf those stubs need at run time.
BUILD_WHEELS=(setuptools==80.10.2 setuptools_scm==10.3.4 vcs-versioning==2.6.0 packaging==26.4
  grpcio==1.78.0 grpcio-tools==1.78.0 protobuf==6.33.6)

fetch() {
  local dir=$1
  mkdir -p "$dir"
  # The index's file of the release (pip download would build the sdist's metadata, and with it
  # install torch 2.13 into an isolated build environment).
  local url
  url=$(curl -fsSL -H "Accept: application/vnd.pypi.simple.v1+json" https://pypi.org/simple/lmcache/ |
    python3 -c "import json,sys; print(next(f['url'] for f in json.load(sys.stdin)['files'] if f['filename'] == 'lmcache-$VERSION.tar.gz'))")
  curl -fsSL -o "$dir/lmcache-$VERSION.tar.gz" "$url"
  echo "$SHA256  $dir/lmcache-$VERSION.tar.gz" | sha256sum -c -
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_28_x86_64 -d "$dir" "${BUILD_WHEELS[@]}"
}

build() {
  local dir=$1 out=${2:-/tmp/lmcache-wheel}
  local deps=/tmp/lmcache-build-deps
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$deps" "$dir"/*.whl
  export PYTHONPATH=$deps${PYTHONPATH:+:$PYTHONPATH}
  rm -rf "/tmp/lmcache-$VERSION"
  tar -xzf "$dir/lmcache-$VERSION.tar.gz" -C /tmp
  cd "/tmp/lmcache-$VERSION"
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
  nvcc --version | tail -2
  export TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 BUILD_WITH_CUDA=1
  local start=$SECONDS
  python3 -m pip wheel -v --no-build-isolation --no-deps --no-index -w "$out" .
  echo "lmcache $VERSION built in $((SECONDS - start)) s: $(ls "$out")"
}

"$@"
