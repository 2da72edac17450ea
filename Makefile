# Set-up and checks. `make demo` and `make test` do everything on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: demo test lint bench clean venv chromium

$(PY):
	$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is required")'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP): $(PY) pyproject.toml
	$(PY) -m pip install --quiet -e .
	touch $@

$(TEST_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/ksched simulate examples/cluster --seed 1

lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check src tests scripts

# The HTML report test loads the report in Debian's chromium; installed when missing and we can
# (root, or sudo without a password), else that test skips with the reason.
chromium:
	@if [ ! -x /usr/bin/chromium ]; then \
		if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then SUDO=sudo; \
		else echo "chromium missing and no root/sudo: the browser test will skip"; exit 0; fi; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends chromium \
			|| echo "could not install chromium: the browser test will skip"; \
	fi

test: $(TEST_STAMP) chromium
	$(VENV)/bin/ruff check src tests scripts
	$(PY) -m pytest -n 2 --dist loadfile

bench: $(STAMP)
	$(VENV)/bin/ksched bench --all

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .ruff_cache
