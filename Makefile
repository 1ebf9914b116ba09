# The two commands of the README: `make run` and `make test`. Each sets up what it needs on a fresh
# machine (Debian packages, the virtual environment in .venv/) and reuses it on the next run. `make run`
# installs only what serving needs; `make test` and `make bench` add their extras and Debian packages.
VENV := .venv
PYTHON := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
TEST_INSTALLED := $(VENV)/.installed-test
BENCH_INSTALLED := $(VENV)/.installed-bench
DOCS_INSTALLED := $(VENV)/.installed-docs

.PHONY: run test lint bench docs system-packages test-system-packages chakra-schema

$(INSTALLED): pyproject.toml
	test -x $(PYTHON) || python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet -e .
	touch $(INSTALLED)

# Playwright, schemathesis, ruff, psycopg, transformers, grpcio-tools: the tests' (and `make chakra-schema`'s).
$(TEST_INSTALLED): $(INSTALLED)
	$(PYTHON) -m pip install --quiet -e '.[test]'
	touch $(TEST_INSTALLED)

# polars (bench_import's second baseline), on top of the tests' extras: the benches start the tests' servers.
$(BENCH_INSTALLED): $(TEST_INSTALLED)
	$(PYTHON) -m pip install --quiet -e '.[test,bench]'
	touch $(BENCH_INSTALLED)

# MkDocs Material, for `make docs` (the test extra has it too: tests/unit/test_docs_site.py builds the site).
$(DOCS_INSTALLED): $(INSTALLED)
	$(PYTHON) -m pip install --quiet -e '.[docs]'
	touch $(DOCS_INSTALLED)

# apt-get install (through sudo unless root) the Debian packages the shell variable `missing` names, if any.
APT_INSTALL = if [ -n "$$missing" ]; then echo "installing Debian packages:$$missing"; \
	if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi; fi

# What serving needs: bubblewrap sandboxes uploaded PyTorch source; the shared ASTRA-sim build beside the
# repository (the simulate page and its tests run it) needs its runtime libraries.
ASTRA_SIM := ../shared/tools/astra-sim/bin/AstraSim_Analytical_Congestion_Unaware
system-packages:
	@missing=""; command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	if [ -x $(ASTRA_SIM) ] && ldd $(ASTRA_SIM) | grep -q "not found"; then \
		missing="$$missing libprotobuf32 libyaml-cpp0.7 libspdlog1.10 libfmt9"; fi; \
	$(APT_INSTALL)

# What only the tests and benches need: Chromium drives the browser tests; PostgreSQL's server (Debian keeps it
# in /usr/lib/postgresql/VERSION/bin) runs their throwaway clusters.
test-system-packages: system-packages
	@missing=""; command -v chromium >/dev/null || missing="$$missing chromium"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	$(APT_INSTALL)

run: $(INSTALLED) system-packages
	$(VENV)/bin/emuplan serve

# Formatting and lint run first: a tree that is not `ruff format`-clean fails before the slow tests.
lint: $(TEST_INSTALLED)
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .

test: lint $(TEST_INSTALLED) test-system-packages
	$(PYTHON) -m pytest

# Every script runs and prints its figures; the exit status says afterwards whether one missed.
bench: $(BENCH_INSTALLED) test-system-packages
	@failed=""; for script in bench/bench_*.py; do echo "== $$script"; $(PYTHON) $$script || failed="$$failed $$script"; done; \
	if [ -n "$$failed" ]; then echo "missed a target or failed:$$failed"; exit 1; fi

# The documentation site (mkdocs.yml, docs/) into site/; --strict: a broken link, anchor or missing page fails.
docs: $(DOCS_INSTALLED)
	$(VENV)/bin/mkdocs build --strict

# Regenerate the Chakra schema module from backend/emuplan/workload/chakra/et_def.proto (commit both).
chakra-schema: $(TEST_INSTALLED)
	cd backend/emuplan/workload/chakra && ../../../../$(PYTHON) -m grpc_tools.protoc -I. --python_out=. et_def.proto
