# `make bench`: every benchmark suite on a release build, peers in the same run, written to
# docs/performance.md by benches/report.py. Extra options go through BENCH_ARGS, e.g.
#   make bench BENCH_ARGS="--quick --suite dispatch"

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv-bench
BENCH_ARGS ?=

.PHONY: bench

bench: $(VENV)/bin/python
	@# A local path always rebuilds and reinstalls: the release wheel of this checkout.
	$(VENV)/bin/python -m pip install '.[bench,postgres]'
	@set -euo pipefail; \
	if pg_env="$$(.ci/postgres.sh start)"; then \
		eval "$$pg_env"; \
		trap '.ci/postgres.sh stop "$$PRISM_TOOLS_PG_DIR"' EXIT; \
	else \
		echo "make bench: PostgreSQL did not start; its rows will be skipped" >&2; \
	fi; \
	$(VENV)/bin/python benches/report.py $(BENCH_ARGS)

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
