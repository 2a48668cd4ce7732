# snaplake — every set-up step lives here; a fresh machine needs only `make demo` / `make test`.
PYTHON ?= python3
VENV := .venv
PAIMON_VENV := .venv-paimon
PY := $(VENV)/bin/python
PYPAIMON_VERSION := 2.1.0
PYTEST_ARGS ?=

.PHONY: venv paimon-venv test lint unit demo demo-ci bench clean prometheus grafana-schema

venv: $(VENV)/.installed
paimon-venv: $(PAIMON_VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade "pip>=25.1"
	$(PY) -m pip install -q -e ".[all]" --group dev
	touch $@

# pypaimon (the format oracle) needs pyarrow<20: it lives in its own virtualenv.
$(PAIMON_VENV)/.installed:
	test -x $(PAIMON_VENV)/bin/python || $(PYTHON) -m venv $(PAIMON_VENV)
	$(PAIMON_VENV)/bin/python -m pip install -q "pypaimon==$(PYPAIMON_VERSION)"
	touch $@

lint: venv
	$(VENV)/bin/ruff format --check snaplake tests benchmarks demo
	$(VENV)/bin/ruff check snaplake tests benchmarks demo
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# Debian's prometheus + promtool and prometheus-pushgateway: the daemon tests run a real
# Prometheus and a real Pushgateway (tests/daemon/).
prometheus:
	@command -v promtool >/dev/null 2>&1 || (apt-get update && apt-get install -y --no-install-recommends prometheus)
	@command -v prometheus-pushgateway >/dev/null 2>&1 || (apt-get update && apt-get install -y --no-install-recommends prometheus-pushgateway)

# @grafana/schema + TypeScript for the strict dashboard check (tests/daemon/test_dashboard.py).
grafana-schema: grafana/.schema-check/node_modules/.bin/tsc
grafana/.schema-check/node_modules/.bin/tsc:
	mkdir -p grafana/.schema-check
	npm i --silent --no-audit --no-fund --prefix grafana/.schema-check @grafana/schema typescript

unit: venv paimon-venv prometheus grafana-schema
	$(PY) -m pytest -q -p no:cacheprovider --durations=15 $(PYTEST_ARGS)

test: lint unit

demo: venv paimon-venv
	$(PY) demo/flights_demo.py --warehouse ./warehouse

# The CI-sized demo (20 files); tests/spark/test_demo.py runs the same inside `make unit`.
demo-ci: venv paimon-venv
	$(PY) demo/flights_demo.py --warehouse ./warehouse-ci --files 20 --rate 10 --metrics-listen auto

bench: venv paimon-venv
	$(PY) benchmarks/commit_latency.py
	$(PY) benchmarks/scan_planning.py
	$(PY) benchmarks/write_read.py
	$(PY) benchmarks/spark_sink.py

clean:
	rm -rf $(VENV) $(PAIMON_VENV) warehouse warehouse-ci .pytest_cache .mypy_cache .ruff_cache
