# The two commands of the README: `make run` and `make test`. Each sets up what it needs on a fresh
# machine (Debian packages, the virtual environment in .venv/) and reuses it on the next run.
VENV := .venv
PYTHON := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed

.PHONY: run test lint bench system-packages chakra-schema

$(INSTALLED): pyproject.toml
	test -x $(PYTHON) || python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet -e '.[test,bench]'
	touch $(INSTALLED)

# Chromium drives the browser tests; bubblewrap sandboxes uploaded PyTorch source; PostgreSQL's server
# (Debian keeps it in /usr/lib/postgresql/VERSION/bin) runs the tests' throwaway clusters; the shared ASTRA-sim
# build beside the repository (the simulation tests run it) needs its runtime libraries.
ASTRA_SIM := ../shared/tools/astra-sim/bin/AstraSim_Analytical_Congestion_Unaware
system-packages:
	@missing=""; command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	if [ -x $(ASTRA_SIM) ] && ldd $(ASTRA_SIM) | grep -q "not found"; then \
		missing="$$missing libprotobuf32 libyaml-cpp0.7 libspdlog1.10 libfmt9"; fi; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
		else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi; \
	fi

run: $(INSTALLED) system-packages
	$(VENV)/bin/emuplan serve

# Formatting and lint run first: a tree that is not `ruff format`-clean fails before the slow tests.
lint: $(INSTALLED)
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .

test: lint $(INSTALLED) system-packages
	$(PYTHON) -m pytest

# Every script runs and prints its figures; the exit status says afterwards whether one missed.
bench: $(INSTALLED) system-packages
	@failed=""; for script in bench/bench_*.py; do echo "== $$script"; $(PYTHON) $$script || failed="$$failed $$script"; done; \
	if [ -n "$$failed" ]; then echo "missed a target or failed:$$failed"; exit 1; fi

# Regenerate the Chakra schema module from backend/emuplan/workload/chakra/et_def.proto (commit both).
chakra-schema: $(INSTALLED)
	cd backend/emuplan/workload/chakra && ../../../../$(PYTHON) -m grpc_tools.protoc -I. --python_out=. et_def.proto
