# The two set-up-and-run commands of the README: `make demo` and `make test`.
# Both create .venv and install ember (with its test extras) on first use, and build
# ember's hand-written C kernels into the kernel cache (`ember kernels`).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -e '.[dev]'
	$(VENV)/bin/ember kernels || echo "(each kernel compiles at its first use instead)"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/ember train examples/digits_cnn.yaml

# one pytest worker per core (pytest-xdist), each test file in one worker
test: $(STAMP)
	$(PY) -m pytest tests -n auto --dist loadfile

bench: $(STAMP)
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) build *.egg-info
