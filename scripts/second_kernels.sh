#!/usr/bin/env bash
# Run the tests that compare two code paths' vectors or scores (pytest -m crosspath) under other CPU kernels
# than this machine picks by itself, so that a tolerance that holds only on one CPU's kernels shows up here
# (docs/testing.md, "Comparing two code paths"; the last run: docs/records/test_second_kernels.md).
#   bash scripts/second_kernels.sh                 # ATen at AVX2 (the default profile)
#   ATEN=default bash scripts/second_kernels.sh    # ATen's scalar kernels
#   bash scripts/second_kernels.sh -n 2 --dist loadgroup -x   # any further arguments go to pytest
# Forced: ATen's vectorised kernels (softmax, layer norm, GELU, reductions), oneDNN's ISA (GELU, bf16
# matrix products), MKL's sgemm (the linear layers: MKL_ENABLE_INSTRUCTIONS on Intel CPUs; MKL_CBWR=COMPATIBLE
# on any CPU, which is what changes sgemm on an AMD one) and the OpenBLAS kernels of numpy and scipy. Each is
# checked before the tests run: the script stops if one did not take effect.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-.venv/bin/python}"
aten="${ATEN:-avx2}"

export ATEN_CPU_CAPABILITY="$aten" ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 MKL_CBWR=COMPATIBLE \
       OPENBLAS_CORETYPE=Haswell HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# a fresh cache: token states or vectors cached under the machine's own kernels would hide the forced ones.
# It starts with copies of the suite cache's reference token counts and any cached WikiText-2 sentence split (no
# float arithmetic of the model in them; the shared files' split is sliced from shipped offsets, not cached), as the tests' own fresh caches do (tests/conftest.py: wikitext_caches).
suite_cache="$("$python" -c 'from embedlab.runtime.settings import cache_dir; print(cache_dir("corpus").parent)')"
cache="$(mktemp -d "${TMPDIR:-/tmp}/second-kernels-cache.XXXXXX")"
trap 'rm -rf "$cache"' EXIT
for folder in corpus reference; do
  if [ -d "$suite_cache/$folder" ]; then cp -r "$suite_cache/$folder" "$cache/"; fi
done
export EMBEDLAB_CACHE="$cache"

echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "CPU flags (vector): $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx|fma|f16c|amx)' | sort | tr '\n' ' ')"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "forced: ATEN_CPU_CAPABILITY=$ATEN_CPU_CAPABILITY ONEDNN_MAX_CPU_ISA=$ONEDNN_MAX_CPU_ISA" \
     "MKL_ENABLE_INSTRUCTIONS=$MKL_ENABLE_INSTRUCTIONS MKL_CBWR=$MKL_CBWR OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE"
# what each library says it runs: torch's ATen capability, OpenBLAS's core type (threadpoolctl), MKL's
# reproducibility branch and oneDNN's ISA (their verbose modes, for one small product and one convolution)
report="$(MKL_VERBOSE=1 ONEDNN_VERBOSE=1 "$python" - 2>&1 <<'PY'
import threadpoolctl
import torch

print("torch.backends.cpu.get_cpu_capability():", torch.backends.cpu.get_cpu_capability())
for pool in threadpoolctl.threadpool_info():
    if pool["internal_api"] == "openblas":
        print("threadpoolctl openblas:", pool["architecture"], pool["filepath"].rsplit("/", 1)[-1])
torch.randn(64, 64) @ torch.randn(64, 64)
torch.nn.functional.conv2d(torch.randn(8, 16, 32, 32), torch.randn(16, 16, 3, 3))
PY
)"
effective="$(grep -E '^(torch|threadpoolctl)' <<<"$report"; grep -m1 -oE 'CNR:[A-Z0-9_]+' <<<"$report" | sed 's/^/MKL sgemm /'; \
             grep -m1 -oE 'isa:[^,]+' <<<"$report" | sed 's/^/oneDNN /')"
echo "$effective"
expected_aten="$(tr '[:lower:]' '[:upper:]' <<<"$aten")"
grep -q "get_cpu_capability(): $expected_aten\$" <<<"$effective" || { echo "ATen did not take ATEN_CPU_CAPABILITY=$aten" >&2; exit 1; }
if grep -q "threadpoolctl openblas" <<<"$effective"; then
  ! grep "threadpoolctl openblas" <<<"$effective" | grep -vq "openblas: Haswell" || { echo "OpenBLAS did not take OPENBLAS_CORETYPE" >&2; exit 1; }
fi
grep -q "MKL sgemm CNR:COMPATIBLE" <<<"$effective" || { echo "MKL did not take MKL_CBWR=COMPATIBLE" >&2; exit 1; }
grep -q "oneDNN isa:.*AVX2\$" <<<"$effective" || { echo "oneDNN did not take ONEDNN_MAX_CPU_ISA=AVX2" >&2; exit 1; }

"$python" -m pytest -q -m crosspath -p no:cacheprovider "$@"  # not exec: the trap removes the cache
