# One command to set up and run the demo offline on CPU, one to test.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup demo app test clean

$(BIN)/.installed: requirements.txt requirements-nodeps.txt requirements-dev.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt -r requirements-dev.txt
	$(BIN)/python -m pip install --quiet --no-deps -r requirements-nodeps.txt
	touch $@

setup: $(BIN)/.installed

# The main job: an episode with rehearsal on the bank example, embedded model, CPU.
demo: setup
	$(BIN)/python -m envace_demo run --env bank --mode parallel --n 2

# The web app on http://127.0.0.1:7860 (the embedded model on CPU, offline).
app: setup
	$(BIN)/python app.py

test: setup
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) .cache .pytest_cache
