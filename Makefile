# Every target does its own set-up: a fresh machine needs only python3 and make.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
MODELS ?= ../shared/models
PYTEST_ARGS ?=
# make test runs on XDIST pytest-xdist workers: one per core (CI has 2), at most 4, not
# `-n auto`: every worker imports TVM, collects the whole suite and compiles its own models, so
# a 64-core box would pay that 64 times in start-up and memory. XDIST=0 (or 1) runs serially
# in this one process. --dist loadfile keeps each test file on one worker, so a module's shared
# fixtures (compiled models, oracles) are built once, not once per worker (rfcs/0006, 7).
NPROC := $(shell nproc 2>/dev/null || echo 1)
XDIST ?= $(shell n=$(NPROC); echo $$(( n < 4 ? n : 4 )))
XDIST_ARGS := $(if $(filter-out 0 1,$(XDIST)),-n $(XDIST) --dist loadfile)

.PHONY: install corpus test test-slow test-torch lint demo demo-planner bench clean

install: $(STAMP)

$(STAMP): setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,opencl,vela,plots,tflm]'
	touch $(STAMP)

# The corpus of third-party streams: every shipped model compiled by Vela 3.11, 4.5 and 5.2
# (one venv each under build/vela-venvs) for three accelerators and both optimise modes, into
# build/corpus (manifest.json lists each case and Vela's message). Cases already compiled from
# the same model and Vela are kept, so a second run does nothing.
CORPUS_BUILD ?= build
corpus: install
	TVM_ETHOS_MODELS=$(abspath $(MODELS)) $(PY) tools/build_corpus.py --build $(CORPUS_BUILD)

test: install corpus
	$(PY) -m pytest -q -m "not slow" $(XDIST_ARGS) $(PYTEST_ARGS) tests

test-slow: install corpus
	$(PY) -m pytest -q -m slow $(XDIST_ARGS) $(PYTEST_ARGS) tests

# ruff.toml holds the rules (pycodestyle, pyflakes, import order; 100 columns).
lint: install
	$(PY) -m ruff check .

# The optional PyTorch front door (the 'torch' extra). torch goes to a side directory, not
# into .venv: once installed, every `import tvm` imports it too (about 3 s per process).
TORCH_LIB ?= .torch-lib
test-torch: install
	test -d $(TORCH_LIB)/torch || $(PY) -m pip install -q --target $(TORCH_LIB) 'torch==2.13.0'
	PYTHONPATH=$(TORCH_LIB) TVM_ETHOS_REQUIRE_TORCH=1 $(PY) -m pytest -q -k torch \
		tests/tvm_ethos/test_import_onnx_torch.py

# The TVM path: tvmc compile + tvmc run on ResNet-8 (CIFAR-10) for ethos-n,opencl, checked
# bit-exact against the TFLite interpreter; then person detection compiled for the Ethos-U to
# a TFLite Micro .tflite, run on tflite-micro's two test images with scores identical to
# TFLite Micro's (nonzero exit if not). Files go to out/demo.
demo: install
	$(PY) -m tvm_ethos.demo $(MODELS)/resnet8_cifar.tflite --target ethos-n,opencl --out out/demo
	$(PY) -m tvm_ethos.demo_person $(MODELS)/tflite-micro/person_detect.tflite \
		$(MODELS)/tflite-micro/person.bmp $(MODELS)/tflite-micro/no_person.bmp --out out/demo

# The planner alone (no TVM): MobileNetV1-224 on ethos-u55-128 within 300 KiB.
demo-planner: install
	$(PY) -m planner demo $(MODELS)/mobilenet_v1_1.0_224.tflite --device ethos-u55-128 --budget 300KiB

bench: install
	$(PY) benchmarks/planner_speed.py --models $(MODELS)
	$(PY) benchmarks/planner_memory.py --models $(MODELS)
	$(PY) benchmarks/zero_copy.py --out out/zero_copy

clean:
	rm -rf $(VENV) $(TORCH_LIB) *.egg-info .pytest_cache .hypothesis
