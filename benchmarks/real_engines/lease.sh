#!/usr/bin/env bash
# One lease of the GPU host, call by call, as it ran for benchmarks/records/lmcache-h200-1gpu-stall.json
# and lmcache-h200-1gpu-v1runner.json (README.md beside this file, "LMCache PD"). The host has torch
# 2.11.0+cu130 and no network; a call carries at most 64 MiB, so vLLM 0.26.0 and the packages it
# and LMCache need travel as one tar of wheels split in parts (carry_wheels.py writes them to
# `.carry/1` ... `.carry/5`, git-ignored), with LMCache's source release and its build's wheels
# (build_lmcache.sh fetch .carry/6), or the wheel an earlier lease built and kept, in a part of
# their own.
#
#   stash N       move the parts carried in .carry/N to /tmp/parts (every carrying call)
#   build         start build_lmcache.sh on /tmp/parts in the background (after part 1); not
#                 needed when the parts carry an LMCache wheel an earlier lease kept
#   install SHA   join the parts, check the tar's sha256, pip install every wheel in it into
#                 /tmp/site
#   drive PLAN [VARIANT...]  in the background: with WAVE=NAME first accuracy.py's wave of that
#                 name (while LMCache builds: the 2026-12-04 lease ran WAVE=fp8), then LMCache's
#                 wheel into /tmp/site-lmcache (once) and the LMCache pair (lmcache_pair.py run,
#                 one start per --variant); results in /tmp/out, the pair's in /tmp/out/${RUN:-lmcache}
#                 (a second drive in one lease takes another RUN)
#   wait SECONDS  follow the driver until it ends or SECONDS pass; /tmp/out as one tar to $OUT
set -euo pipefail

PARTS=/tmp/parts
SITE=/tmp/site
SITE_LMCACHE=/tmp/site-lmcache
RESULTS=${LEASE_RESULTS:-/tmp/out}  # the results folder (a test gives its own)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export PYTHONPATH=$SITE:$SITE_LMCACHE PATH=$SITE/bin:$PATH

stash() {
  mkdir -p "$PARTS"
  mv ".carry/$1"/* "$PARTS"/
  ls -la "$PARTS"
}

build() {
  setsid nohup "$ROOT/benchmarks/real_engines/build_lmcache.sh" build "$PARTS" /tmp/lmcache-wheel \
    >/tmp/build.log 2>&1 </dev/null &
  echo "build started: /tmp/build.log"
}

install() {
  local sha=$1
  cat "$PARTS"/wheels.tar.part-* >/tmp/wheels.tar
  echo "$sha  /tmp/wheels.tar" | sha256sum -c -
  mkdir -p /tmp/wheels && tar -xf /tmp/wheels.tar -C /tmp/wheels && rm /tmp/wheels.tar
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" /tmp/wheels/*.whl
  python3 -c "import vllm, nixl; print('vllm', vllm.__version__)"
}

# LMCache's wheel in a folder of its own (a second `pip install --target` into /tmp/site would
# need --upgrade, which replaces what the first put there): one carried in the parts (an earlier
# lease's, kept with its results), with the sdist only unpacked for the PD proxy script the pair
# runs; else the one `build` makes.
install_lmcache() {
  [[ -d $SITE_LMCACHE/lmcache ]] && return
  local wheels=("$PARTS"/lmcache-*.whl)
  if [[ -f ${wheels[0]} ]]; then
    tar -xzf "$PARTS"/lmcache-*.tar.gz -C /tmp
  else
    wait_build
    wheels=(/tmp/lmcache-wheel/*.whl)
  fi
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE_LMCACHE" "${wheels[@]}"
  python3 -c "import lmcache.cuda_ops, lmcache; print('lmcache', lmcache.__version__)"
  # Kept in the results folder for a later lease to carry (`wait` leaves it out of its tar: copy it
  # to $OUT in a call of its own).
  mkdir -p "$RESULTS" && cp "${wheels[@]}" "$RESULTS"/
}

wait_build() {
  until grep -q "built in" /tmp/build.log; do
    if ! pgrep -f "build_lmcache.sh build" >/dev/null; then
      tail -30 /tmp/build.log
      exit 1
    fi
    sleep 5
  done
  tail -1 /tmp/build.log
}

drive() {
  local plan=$1 variants="" wave=""
  shift
  for v in "$@"; do variants+=" --variant '$v'"; done
  if [[ -n ${WAVE:-} ]]; then
    wave="python3 benchmarks/real_engines/accuracy.py --wave $WAVE --startup-timeout 900 \
      --record '$RESULTS/accuracy-$WAVE.json'"
  fi
  mkdir -p "$RESULTS"
  setsid nohup bash -c "
    $wave
    '$0' install-lmcache
    python3 benchmarks/real_engines/lmcache_pair.py run --plan '$plan' \
      --out '$RESULTS/${RUN:-lmcache}' $variants
    echo DRIVER-DONE" >"$RESULTS/driver.log" 2>&1 </dev/null &
  echo "driver started: $RESULTS/driver.log"
}

wait_for() {
  local until=$((SECONDS + $1))
  # A machine given back while idle comes back fresh, with no driver: say so at once (the
  # 2026-12-04 lease's poll waited out 420 s on one).
  if [[ ! -f $RESULTS/driver.log ]]; then
    echo "no driver ran on this machine (a fresh one: the lease's machine went back while idle)" >&2
    exit 1
  fi
  while ((SECONDS < until)) && ! grep -q DRIVER-DONE "$RESULTS/driver.log"; do
    sleep 10
  done
  tail -40 "$RESULTS/driver.log"
  nvidia-smi --query-gpu=memory.used --format=csv
  # One file back: the copy-back refuses folders of many files (the 2026-12-04 lease lost the
  # logs that way); the engines' Prometheus folders and the LMCache wheel stay behind.
  tar --exclude='prom-*' --exclude='*.whl' -czf "$OUT/results.tgz" -C "$RESULTS" .
}

case $1 in
  stash | build | install | drive) "$@" ;;
  install-lmcache) install_lmcache ;;
  wait) wait_for "$2" ;;
  *) echo "usage: $0 stash N | build | install SHA | drive PLAN [VARIANT...] | wait SECONDS" >&2 && exit 2 ;;
esac
