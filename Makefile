# Two commands do everything on a fresh machine (Python 3.11 as python3):
#   make demo   set up, then run the quick PyTorch-vs-TensorFlow comparison
#   make test   set up, then lint, type-check and run the test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# CPU flavours of TensorFlow and ONNX Runtime; GPU machines:
#   make EXTRAS=torch,tensorflow-cuda,jax,flax,llm,onnx-cuda,openvino,litert,energy,serve,dev
EXTRAS ?= torch,tensorflow,jax,flax,llm,onnx,openvino,litert,serve,dev
RESULTS := fwbench-results

.PHONY: setup demo test lint browser clean

# keras-hub goes in without its requirements (pyproject.toml, extra `llm`, says why).
$(BIN)/fwbench: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[$(EXTRAS)]'
	$(BIN)/pip install --quiet --no-deps 'keras-hub==0.32.*'
	touch $@

setup: $(BIN)/fwbench

demo: setup
	$(BIN)/fwbench env
	$(BIN)/fwbench sweep --preset quick --db $(RESULTS)/quick.duckdb \
	  --report $(RESULTS)/quick-report.html --report $(RESULTS)/quick-report.md

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# The HTML report test opens the report in Debian's chromium (never a downloaded one).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get install -y -q chromium || (apt-get update -q && apt-get install -y -q chromium)) >/dev/null; \
	  else echo "no chromium and not root: the browser test will be skipped"; fi; }

# Two test processes, each a test file at a time (a file's module fixtures built once):
# most of a test's time is a framework's import or compilation in one thread, so two
# overlap on two cores (the suite took 40-48 min so, against 61-68 min in one process).
TEST_PROCESSES ?= 2
test: lint browser
	FWBENCH_ARTIFACTS=$(RESULTS)/test-artifacts $(BIN)/pytest -n $(TEST_PROCESSES) --dist loadfile

clean:
	rm -rf $(VENV) $(RESULTS)
