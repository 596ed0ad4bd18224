# traintime: the two commands of the README are `make run` and `make test`.
# Both create the virtual environment .venv on first use (Python 3.11, pinned requirements.txt).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
CORES  ?= 2
STAMP  := $(VENV)/.installed
# Snakemake imports every installed executor plugin, and the SLURM plugin runs `scontrol show config` on import: where
# SLURM's tools are installed but no controller answers (e.g. after `make test` as root stopped its test cluster) that
# waits about 9 s. The targets that start Snakemake run it locally, so they export SLURM_CONF pointing at an empty file
# (scontrol then fails at once) unless SLURM_CONF is set; `snakemake --profile profiles/slurm` on a cluster is not
# affected. (tests/conftest.py does the same for the tests.)
EMPTY_SLURM_CONF := $(VENV)/empty-slurm.conf
run dry-run lint bench report readme: export SLURM_CONF ?= $(abspath $(EMPTY_SLURM_CONF))

.PHONY: setup lock run dry-run test test-fast test-slurm slurm-up slurm-down lint bench report docs readme clean help

help:
	@echo "make run       set up .venv and run the default DAG (results/)"
	@echo "make test      set up .venv and run the test suite"
	@echo "make dry-run   list the jobs of the default DAG"
	@echo "make lint      snakemake --lint"
	@echo "make bench     time the default DAG from scratch (benchmarks/dag_walltime.py)"
	@echo "make test-slurm  SLURM executor test on a local single-node cluster (root; apt-get)"
	@echo "make report    build report.zip from results/ (snakemake --report)"
	@echo "make lock      re-pin requirements/lock*.txt from requirements.txt (after changing a pin)"
	@echo "make docs      regenerate docs/architecture.md and docs/data.md"
	@echo "make readme    copy the numbers of results/ into README.md's generated blocks"

# On Linux x86-64 the set-up installs the exact versions of requirements/lock.txt and lock-cuda.txt (`make lock`
# writes them from pip's resolution of requirements.txt) with --no-deps, in two pip processes side by side: unpacking
# the wheels (6 GB, PyTorch's CUDA runtime most of it) is what takes the time, and each pip unpacks on one core
# (about 50 s instead of 80-100 s on 2 cores; compiling the bytecode beside the CUDA unpacking gained nothing, 2 cores
# being busy already); `pip check` then checks the result. Elsewhere pip resolves requirements.txt itself.
LOCKED := $(filter Linux-x86_64,$(shell uname -s)-$(shell uname -m))

$(STAMP): requirements.txt requirements/analysis.txt requirements/torch.txt requirements/lock.txt \
          requirements/lock-cuda.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
ifneq ($(LOCKED),)
	$(BIN)/python -m pip install --quiet --no-compile --no-deps -r requirements/lock-cuda.txt & cuda=$$!; \
	$(BIN)/python -m pip install --quiet --no-compile --no-deps -r requirements/lock.txt; rest=$$?; \
	wait $$cuda && test $$rest -eq 0
	$(BIN)/python -m pip check
else
	$(BIN)/python -m pip install --quiet --no-compile -r requirements.txt
endif
	$(BIN)/python -m pip install --quiet --no-compile --no-deps -e .
	@# bytecode of the installed packages and of src/ on every core (pip compiles on one, about 25 s more),
	@# less the packages' own test suites (tests/ folders: a quarter of the files, nothing here imports them;
	@# about 4 s); files that do not compile (other Pythons' sources inside some packages) are left as pip leaves them
	$(BIN)/python -m compileall -qq -j 0 -x '/tests?/' $(VENV)/lib src || true
	touch $(STAMP)

setup: $(STAMP) $(EMPTY_SLURM_CONF)

# the lock files of the set-up (above) from a fresh resolution of requirements.txt; run after changing a pin
lock:
	rm -rf .lock-venv
	$(PYTHON) -m venv .lock-venv
	.lock-venv/bin/python -m pip install --quiet --upgrade pip
	.lock-venv/bin/python -m pip install --quiet --no-compile -r requirements.txt
	.lock-venv/bin/python -m pip list --format=freeze --exclude-editable | $(PYTHON) requirements/split_lock.py requirements
	rm -rf .lock-venv

$(EMPTY_SLURM_CONF): $(STAMP)
	: > $@

run: setup
	$(BIN)/snakemake --cores $(CORES)

dry-run: setup
	$(BIN)/snakemake -n --quiet rules

test: setup
	$(BIN)/python -m pytest

test-fast: setup
	$(BIN)/python -m pytest -m "not slow and not slurm"

test-slurm: setup
	$(BIN)/python -m pytest -m slurm tests/test_slurm.py

slurm-up:
	.ci/slurm_up.sh

slurm-down:
	.ci/slurm_down.sh --purge

lint: setup
	$(BIN)/snakemake --lint

bench: setup
	$(BIN)/python benchmarks/dag_walltime.py --cores $(CORES)

report: setup
	$(BIN)/snakemake --cores $(CORES) --report report.zip

docs: setup
	$(BIN)/python -m traintime.core.architecture
	$(BIN)/traintime schemas > docs/data.md

readme: setup
	$(BIN)/snakemake --cores $(CORES) results/readme_blocks.md
	$(BIN)/python -m traintime.core.readme results/readme_blocks.md README.md

clean:
	rm -rf results .snakemake report.zip
