# PosBench: `make sweep` runs the default comparison, `make test` the test suite.
# Both create the virtual environment they need. GPU users: make install TORCH="torch==2.13.0 --index-url ..."
PYTHON ?= python3
VENV   ?= .venv
TORCH  ?= torch==2.13.0
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
CORPORA := .cache/corpora
CORPORA_STAMP := $(CORPORA)/python3.11-doc.stamp
SWEEP  ?= default
ARGS   ?=
TEST_JOBS ?= auto
RUN    ?=
TASKS  ?= posbench_core
# what a GPU node with its own torch, numpy, pandas, PyYAML and tqdm lacks to run PosBench offline
# (pure-Python wheels, so one set serves any Python 3 and platform)
# the value of key=VALUE in ARGS (the last one wins), empty when ARGS does not set it
arg = $(patsubst $(1)=%,%,$(lastword $(filter $(1)=%,$(ARGS))))
NODE_WHEELS ?= "hydra-core==1.3.8" "omegaconf==2.3.1" "hydra-joblib-launcher==1.2.0" "tabulate==0.10.0" "packaging==26.4"

# The tests start some 25 interpreters (pytest-xdist workers, forked command servers, subprocesses); each
# reads the modules and the assert-rewritten test files the first one compiled, from the __pycache__ folders
# (git-ignored), even where the environment sets PYTHONDONTWRITEBYTECODE.
PYTEST = env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -n $(TEST_JOBS) --dist worksteal --durations=15

.DEFAULT_GOAL := help
# make checkpoint writes, and make sweep RESUME=checkpoint reads, <CHECKPOINTS>/<sweep>.jsonl.gz
CHECKPOINTS := checkpoints
.PHONY: help install corpora test test-exhaustive sweep report checkpoint publish report-check bench bench-numerics bench-gpu wheelhouse summary lmeval reproduce store-snapshot clean

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

install: $(STAMP) $(CORPORA_STAMP) ## create .venv, install PosBench (torch pinned by TORCH=...) and fetch the prose corpus

corpora: $(CORPORA_STAMP) ## fetch the prose corpus: Debian's python3.11-doc, unpacked under .cache/corpora (apt-get download; nothing is installed)

$(CORPORA_STAMP):
	rm -rf $(CORPORA)/python3.11-doc && mkdir -p $(CORPORA)/python3.11-doc
	cd $(CORPORA) && apt-get download python3.11-doc && dpkg-deb --fsys-tarfile python3.11-doc_*.deb \
		| tar -x -C python3.11-doc ./usr/share/doc/python3.11/html/_sources && rm -f python3.11-doc_*.deb
	touch $@

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install "$(TORCH)"
	$(BIN)/pip install -e ".[test,hf]"
	touch $(STAMP)

test: install ## run the test suite on every core (TEST_JOBS=auto), printing the 15 slowest tests
	$(PYTEST) -m "not exhaustive" tests

test-exhaustive: install ## the rest of the parametrized grids (every scheme x span x path); CI runs it after make test
	$(PYTEST) -m exhaustive tests

sweep: install ## run a sweep (SWEEP=default|flagship|kz|windows|hybrids|zoo|state|flipflop_path|lm|scale|recipe|gpu|gpu_copy|lm_gpu), then its report; RESUME=published (or checkpoint) first unpacks published/<sweep>.jsonl.gz (or checkpoints/<sweep>.jsonl.gz) so its runs are not trained again
	$(if $(filter published checkpoint,$(RESUME)),$(BIN)/python -m suite.results.shipped unpack $(SWEEP) --results $(or $(call arg,results_dir),results) --published $(if $(filter checkpoint,$(RESUME)),$(CHECKPOINTS),published),$(if $(RESUME),@echo "RESUME=$(RESUME): valid: published or checkpoint"; exit 2))
	$(BIN)/python -m suite.run +sweep=$(SWEEP) $(ARGS)
	$(MAKE) --no-print-directory report SWEEP=$(or $(call arg,sweep_name),$(SWEEP)) RESULTS=$(or $(call arg,results_dir),results)

report: install ## build a sweep's report from <RESULTS>/<sweep>/ (RESULTS=results), else from published/<sweep>.jsonl.gz: reports/<sweep>/ only for the published board built from its shipped rows as they are, any other build under reports-local/<sweep>/ (FROM=results|published, BESIDE=<folder or .jsonl.gz>, METRIC=..., WANDB=offline|online, PROJECT=..., ENTITY=...); FORCE=1 replaces a report that holds more runs
	$(BIN)/python -m suite.report $(SWEEP) $(if $(RESULTS),--results $(RESULTS)) $(if $(FROM),--from $(FROM)) $(foreach b,$(BESIDE),--beside $(b)) $(if $(METRIC),--metric $(METRIC)) $(if $(WANDB),--wandb $(WANDB)) $(if $(PROJECT),--project $(PROJECT)) $(if $(ENTITY),--entity $(ENTITY)) $(if $(filter 1,$(FORCE)),--force)

report-check: install ## check that README's marked tables quote only numbers their reports hold, then open every reports/*/index.html in headless Chromium and check what a reader sees (apt-get install chromium)
	$(BIN)/python -m suite.report.readme_check
	$(BIN)/pip install -q -e ".[check]"
	$(BIN)/python -m suite.report.page_check $(patsubst %/index.html,%,$(wildcard reports/*/index.html))

checkpoint: install ## pack results/<sweep>/ into checkpoints/<sweep>.jsonl.gz: the runs of a sweep still under way, committed so that `make sweep RESUME=checkpoint` goes on from them on another machine; no report reads them, and it refuses to replace a checkpoint with fewer runs
	$(BIN)/python -m suite.results.shipped pack $(SWEEP) --published $(CHECKPOINTS)

publish: install ## pack results/<sweep>/ into published/<sweep>.jsonl.gz, the rows a published report is rebuilt from, and rebuild reports/<sweep>/ from them; it refuses to replace a board with fewer runs or configurations unless REPLACE=1
	$(if $(filter-out 0 1,$(REPLACE)),@echo "REPLACE=$(REPLACE): valid: 1 (replace the shipped board even with fewer runs or configurations) or 0"; exit 2)
	$(BIN)/python -m suite.results.shipped pack $(SWEEP)$(if $(filter 1,$(REPLACE)), --replace)
	$(BIN)/python -m suite.report $(SWEEP) --from published$(if $(filter 1,$(REPLACE)), --force)

bench: install ## measure speed and memory side by side; writes reports/perf/
	$(BIN)/python -m suite.bench.perf

bench-numerics: install ## the numeric pins' cost and effect: one run trained pinned and unpinned, alternating; writes reports/perf/numerics.*
	$(BIN)/python -m suite.bench.numerics

bench-gpu: install ## on a CUDA machine: bf16 training tokens/s, MFU, FlexAttention vs SDPA per span; writes reports/perf-gpu/
	$(BIN)/python -m suite.bench.gpu

wheelhouse: ## wheels of the pure-Python dependencies for an offline GPU node (README: "Offline GPU nodes")
	rm -rf wheelhouse && mkdir -p wheelhouse
	$(PYTHON) -m pip download --no-deps --only-binary=:all: -d wheelhouse $(NODE_WHEELS)
	$(PYTHON) -m pip wheel --no-deps -w wheelhouse "antlr4-python3-runtime==4.9.3"

summary: install ## print the leaderboard of <RESULTS>/<SWEEP> in the terminal (the cells of its report's leaderboard.csv)
	$(BIN)/python -m suite.report.summary $(or $(RESULTS),results)/$(SWEEP) $(if $(METRIC),--metric $(METRIC))

lmeval: install ## score a stored run with lm-eval (RUN=<run id, hash, result file or _work dir>, TASKS=posbench_core, ARGS=...)
	@test -n "$(RUN)" || { echo "set RUN=<run id, its hash, result file or _work/<run_id> folder>"; exit 2; }
	$(BIN)/python -m suite.lmeval --run $(RUN) --tasks $(TASKS) $(ARGS)

reproduce: install ## rerun K runs (default 3) of a published sweep, each judged by the prediction interval of one new run from its cell's seeds (SWEEP=..., K=...); CELLS=N instead reruns every seed of N cells and compares the means with Welch's interval (OUT=page.md also writes that table)
	$(BIN)/python -m suite.reproduce $(SWEEP) $(if $(CELLS),--cells $(CELLS),-k $(or $(K),3))$(if $(OUT), --out $(OUT))

store-snapshot: install ## rewrite suite/config/store_snapshot.json, which answers posbench run --help and tab completion without torch (after an edit to the schema, a scheme, a task or a conf/ YAML)
	$(BIN)/python -m suite.config.store_snapshot

clean: ## remove run output (results/, wandb/, outputs/, multirun/)
	rm -rf results wandb outputs multirun
