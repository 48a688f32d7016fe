VENV ?= .venv
BIN := $(VENV)/bin
# Kept across clones, as pip's wheels are: a cold type check takes over a minute, a warm one
# seconds (each file is checked again when its content changes).
MYPY_CACHE ?= $(HOME)/.cache/qatune/mypy

.PHONY: setup setup-test run test test-fast lint format bench clean vllm

setup: $(VENV)/.installed-run  ## what the service needs
setup-test: $(VENV)/.installed-test  ## and what the tests, lint and benchmarks need

$(VENV)/.installed-run: pyproject.toml scripts/setup.sh scripts/models.txt
	bash scripts/setup.sh $(VENV) run

$(VENV)/.installed-test: pyproject.toml scripts/setup.sh scripts/models.txt
	bash scripts/setup.sh $(VENV) test

run: setup  ## set up, then start the service on http://127.0.0.1:8000 (PORT=8080 for another)
	$(BIN)/qatune serve $(if $(PORT),--port $(PORT))

test: setup-test  ## set up, then run every test (unit, API, end-to-end, browser)
	VENV=$(VENV) bash scripts/test.sh

test-fast: setup-test  ## the inner loop: unit and API tests on SQLite, no server process or browser
	QATUNE_TEST_DATABASES=sqlite VENV=$(VENV) bash scripts/test.sh -p no:hypothesispytest -p no:schemathesis -n 2 -m "not slow and not serial" tests/core tests/ml tests/services tests/worker tests/api tests/bench tests/test_layers.py tests/test_docs.py tests/test_main.py

vllm:  ## the vLLM environment for QATUNE_SERVING_BACKEND=vllm (docs/scaling.md)
	bash scripts/setup_vllm.sh .venv-vllm

lint: setup-test
	$(BIN)/ruff check app tests bench alembic
	$(BIN)/ruff format --check app tests bench alembic
	$(BIN)/mypy --cache-dir "$(MYPY_CACHE)" app bench tests

format: setup-test
	$(BIN)/ruff check --fix app tests bench alembic
	$(BIN)/ruff format app tests bench alembic

bench: setup-test  ## training throughput, side by side with the baselines
	$(BIN)/python -m bench.train_throughput

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
