# SessionHub — `make help` lists the targets.
SHELL := /bin/bash
# The interpreter the virtualenv is made from (make install PYTHON=... to choose). By
# default the distribution's own Python 3.11 where it has one that can make a venv:
# Debian and Ubuntu build theirs with profile-guided and link-time optimisation, as the
# python:3.11 image the Dockerfile starts from is built; an interpreter compiled without
# them (pyenv's default build, say) runs SessionHub's requests with 10-30% more CPU
# (docs/benchmarks.md, "An optimised interpreter"). Else python3 from the PATH.
ifeq ($(origin PYTHON),undefined)
PYTHON := $(if $(shell /usr/bin/python3.11 -c 'import ensurepip, venv' 2>/dev/null && echo y),/usr/bin/python3.11,python3)
endif
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk -F':.*?## ' '{printf "  \033[1m%-14s\033[0m %s\n", $$1, $$2}'
	@echo
	@echo "Variables (make run HOST=0.0.0.0 PORT=9000):"
	@echo "  HOST           address make run serves on (now $(HOST))"
	@echo "  PORT           port make run serves on (now $(PORT))"
	@echo "  PYTHON         the interpreter make install builds .venv from (now $(PYTHON))"
	@echo "  PYTEST_ARGS    extra pytest arguments for make test (e.g. -x tests/lifecycle)"
	@echo "  BENCH_ARGS     extra arguments for the benchmarks"

$(BIN)/.installed: pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $@

.PHONY: install
install: $(BIN)/.installed ## Create the virtualenv and install SessionHub with its dev tools

.env:
	@echo "Writing .env for local development (DEBUG on, a generated SECRET_KEY)"
	@printf 'DEBUG=1\nSECRET_KEY=%s\n' "$$($(PYTHON) -c 'import secrets; print(secrets.token_urlsafe(50))')" > .env

.PHONY: run
run: install .env ## Run SessionHub embedded (SQLite, tasks in-process) on http://$HOST:$PORT (127.0.0.1:8000)
	$(BIN)/python manage.py migrate --noinput
	@$(BIN)/python manage.py bootstrap
	$(BIN)/python manage.py runserver $(HOST):$(PORT)

.PHONY: test
test: install ## Run the whole test suite (PostgreSQL and Redis when they answer)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# What the embedded default runs (SQLite, tasks in-process, no Redis): ingest, the state
# fold, continuity and memory, against a SQLite file as `make run` uses one.
SQLITE_TESTS := tests/lifecycle tests/memory tests/sessionhub tests/reliability/test_state_properties.py \
	--ignore=tests/memory/test_secrets_everywhere.py --ignore=tests/memory/test_worker.py \
	--deselect=tests/lifecycle/test_outages.py::test_broker_down_events_stored_and_the_outbox_catches_up

.PHONY: test-sqlite
test-sqlite: install ## The embedded default's leg: ingest, state and continuity on SQLite, no Redis
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	env DATABASE_URL="sqlite:///$$tmp/sessionhub.sqlite3" REDIS_URL= \
		SESSIONHUB_TEST_SQLITE_FILE="$$tmp/test.sqlite3" \
		$(BIN)/python -m pytest -p no:cacheprovider $(SQLITE_TESTS) $(PYTEST_ARGS)

# The apps held to mypy --strict (the same configuration and plugins, pyproject.toml).
STRICT_PACKAGES := sessionhub lifecycle memory dashboard

.PHONY: lint
lint: install ## ruff, mypy (--strict for the apps), Django checks, migrations up to date, hook client built from its sources
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/mypy --strict $(STRICT_PACKAGES)
	$(BIN)/python integrations/claude-code/build.py --check
	DJANGO_SETTINGS_MODULE=sessionhub.settings_test $(BIN)/python manage.py check
	DJANGO_SETTINGS_MODULE=sessionhub.settings_test $(BIN)/python manage.py makemigrations --check --dry-run

.PHONY: hook
hook: ## Rebuild integrations/claude-code/sessionhub_hook.py (the file users copy) from its sources in src/
	$(PYTHON) integrations/claude-code/build.py

.PHONY: typecheck
typecheck: install ## mypy with the Django and DRF plugins (configured in pyproject.toml), --strict for the apps
	$(BIN)/mypy
	$(BIN)/mypy --strict $(STRICT_PACKAGES)

.PHONY: format
format: install ## Format the code with ruff
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

.PHONY: worker
worker: install ## A Celery worker (needs REDIS_URL)
	$(BIN)/celery -A sessionhub worker --loglevel=INFO

.PHONY: beat
beat: install ## Celery beat: crash sweep, outbox sweep, retention (needs REDIS_URL)
	$(BIN)/celery -A sessionhub beat --loglevel=INFO

.PHONY: bench
bench: install ## The benchmark: SessionHub as in production vs the raw database and the peer
	$(BIN)/python bench/run.py $(BENCH_ARGS)

.PHONY: soak
soak: install ## 10 minutes at 300 events/s: nothing lost, memory flat
	$(BIN)/python bench/soak.py --minutes 10 --rate 300 --batch 5

.PHONY: bench-dashboard
bench-dashboard: install ## Time the dashboard's session list with 100,000 sessions
	$(BIN)/python bench/dashboard_list.py

.PHONY: clean
clean: ## Remove the virtualenv, caches and the local SQLite database
	rm -rf $(VENV) .pytest_cache .ruff_cache sessionhub.sqlite3* staticfiles

.PHONY: superuser
superuser: install .env ## Create an admin user (no terminal: DJANGO_SUPERUSER_USERNAME, _PASSWORD, _EMAIL)
	@if [ -t 0 ]; then \
		$(BIN)/python manage.py createsuperuser; \
	elif [ -n "$$DJANGO_SUPERUSER_USERNAME" ] && [ -n "$$DJANGO_SUPERUSER_PASSWORD" ]; then \
		DJANGO_SUPERUSER_EMAIL="$${DJANGO_SUPERUSER_EMAIL:-$$DJANGO_SUPERUSER_USERNAME@localhost}" \
			$(BIN)/python manage.py createsuperuser --noinput; \
	else \
		echo "make superuser: no terminal to ask on. Set DJANGO_SUPERUSER_USERNAME and" \
			"DJANGO_SUPERUSER_PASSWORD (and DJANGO_SUPERUSER_EMAIL), or run it in a terminal." >&2; \
		exit 2; \
	fi

.PHONY: bench-scale
bench-scale: install ## Request costs at 1k/100k/1M sessions and 0/1M/10M events (about 20 minutes)
	$(BIN)/python bench/scale.py $(BENCH_ARGS)
