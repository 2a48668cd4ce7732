# snaplake — every set-up step lives here; a fresh machine needs only `make demo` / `make test`.
PYTHON ?= python3
VENV := .venv
PAIMON_VENV := .venv-paimon
PY := $(VENV)/bin/python
PYPAIMON_VERSION := 2.1.0
PYTEST_ARGS ?=
PYTEST = $(PY) -m pytest -q -p no:cacheprovider

.PHONY: venv paimon-venv test lint unit demo demo-ci bench clean prometheus grafana-schema \
	package-smoke java-paimon java node venv-prereq spec-quint

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
	@.ci/prereqs prometheus

# @grafana/schema + TypeScript for the strict dashboard check (tests/daemon/test_dashboard.py).
grafana-schema: grafana/.schema-check/node_modules/.bin/tsc
grafana/.schema-check/node_modules/.bin/tsc:
	mkdir -p grafana/.schema-check
	npm i --silent --no-audit --no-fund --prefix grafana/.schema-check @grafana/schema typescript

# Quint (pinned; antlr4ts 0.5.0-dev breaks it) for the commit-protocol spec checks
# (tests/spec/, docs/commit-protocol.md).
spec-quint: spec/.quint/node_modules/.bin/quint
spec/.quint/node_modules/.bin/quint:
	mkdir -p spec/.quint
	npm i --silent --no-audit --no-fund --prefix spec/.quint @informalsystems/quint@0.33.1 antlr4ts@0.5.0-alpha.4

# Java Paimon 0.9 (from the pypaimon 0.2.0 sdist) and the reader of tests/oracle/java/: the
# second format oracle (tests/integration/test_java_paimon_reads.py). Needs javac (JDK 17).
java-paimon: venv java
	$(PY) -m tests.oracle.java_paimon build

# Tools beyond Python (README "Prerequisites"): installed with apt-get as root or through sudo,
# else make stops at once naming the tool (.ci/prereqs).
java node:
	@.ci/prereqs $@
venv-prereq:
	@test -x $(PY) || PYTHON=$(PYTHON) .ci/prereqs venv
$(VENV)/.installed: | venv-prereq
grafana/.schema-check/node_modules/.bin/tsc: | node
spec/.quint/node_modules/.bin/quint: | node

# The in-process suites (unit, property) run on both cores, a module per worker. So do the
# suites that mostly wait on other processes (pypaimon, the Java Paimon JVM, quint), except
# the modules that race processes or servers against each other (crashes, concurrency, S3):
# those and the daemons run one test at a time after them, beside Spark's tests (one test at
# a time too, in a second pytest process; its output is printed when both are done).
# PYTEST_ARGS (e.g. a path or -k) replaces the split and runs what it names, serially.
PARALLEL_SUITES := tests/unit tests/property
WAITING_SUITES := tests/integration tests/spec tests/oracle
SERIAL_MODULES := $(wildcard tests/integration/s3 $(addprefix tests/integration/test_, \
	concurrency.py crash_safety.py dynamic_bucket_crash.py dynamic_bucket_race.py \
	maintenance_concurrency.py pk_deletion_vectors_crash.py pk_writer_daemon.py \
	subscription_crash.py))
# Everything else (a directory, or a module at the top of tests/), one test at a time.
SERIAL_SUITES := $(filter-out $(PARALLEL_SUITES) $(WAITING_SUITES) tests/__pycache__, \
	$(patsubst %/,%,$(wildcard tests/*/)) $(wildcard tests/test_*.py))
unit: java node venv paimon-venv prometheus grafana-schema java-paimon spec-quint
ifeq ($(strip $(PYTEST_ARGS)),)
	$(PYTEST) -n 2 --dist loadfile --durations=10 $(PARALLEL_SUITES)
	$(PYTEST) -n 2 --dist loadfile --durations=15 $(addprefix --ignore=,$(SERIAL_MODULES)) \
		$(WAITING_SUITES)
	@rm -f .spark-tests.log .spark-tests.rc
	($(PYTEST) --durations=15 tests/spark > .spark-tests.log 2>&1; echo $$? > .spark-tests.rc) & \
	$(PYTEST) --durations=15 $(filter-out tests/spark,$(SERIAL_SUITES)) $(SERIAL_MODULES); \
	rest=$$?; wait; echo "--- tests/spark"; cat .spark-tests.log; \
	test $$rest -eq 0 && test "$$(cat .spark-tests.rc)" = 0
else
	$(PYTEST) --durations=15 $(PYTEST_ARGS)
endif

test: java node lint unit package-smoke

# The wheel alone in a fresh venv, then each extra alone: the README quick start must run there
# (tests/packaging/). SMOKE_EXTRAS=core,spark,... to choose; spark is opt-in (a 456 MB wheel).
SMOKE_EXTRAS ?= core,pandas,s3,cli,metrics,daemon
package-smoke: venv
	$(PY) tests/packaging/fresh_install.py --extras $(SMOKE_EXTRAS)

demo: java venv paimon-venv java-paimon
	$(PY) demo/flights_demo.py --warehouse ./warehouse

# The CI-sized demo (20 files); tests/spark/test_demo.py runs the same inside `make unit`.
demo-ci: java venv paimon-venv java-paimon
	$(PY) demo/flights_demo.py --warehouse ./warehouse-ci --files 20 --rate 10 --metrics-listen auto

bench: venv paimon-venv
	$(PAIMON_VENV)/bin/python -m pip install -q "pypaimon-rust==0.4.0"
	$(PY) benchmarks/commit_latency.py
	$(PY) benchmarks/scan_planning.py
	$(PY) benchmarks/write_read.py
	$(PY) benchmarks/spark_sink.py

clean:
	rm -rf $(VENV) $(PAIMON_VENV) .java-paimon warehouse warehouse-ci .pytest_cache .mypy_cache .ruff_cache .spark-tests.log .spark-tests.rc
