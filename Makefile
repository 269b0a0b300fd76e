# make train: the default job; make test: ruff, then the test suite. Both first run `make setup`,
# which creates .venv (if missing) and installs into it PyTorch's CPU build, then this package
# (editable, with the dev, fetch, robosuite, ray, plot, wandb, video and tune extras), and compiles
# robosuite's numba kernels. It reinstalls only when pyproject.toml changes.
#   make train ARGS="seed=3 algo.group_size=8"   # Hydra overrides for scripts/train.py
#   make test ARGS="-m slow -x"                  # options for pytest

PYTHON ?= python3
TORCH ?= torch==2.13.0
EXTRAS ?= dev,fetch,robosuite,ray,plot,wandb,video,tune
ARGS ?=

VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# As `. .venv/bin/activate` would, for the commands below and anything they start.
export VIRTUAL_ENV := $(abspath $(VENV))
export PATH := $(VIRTUAL_ENV)/bin:$(PATH)

.PHONY: setup train test

setup: $(STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# PyTorch first: left to resolve `torch` itself, pip may download a multi-GB CUDA build. Last, one
# robosuite Lift step: its numba kernels compile at their first call and are cached in the install
# (about 20 s on 2 cores), here once rather than in the first run or test (with the robosuite extra).
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install $(TORCH)
	$(BIN)/pip install -e ".[$(EXTRAS)]"
	$(if $(findstring robosuite,$(EXTRAS)),$(BIN)/python -c "from grpo_robot.envs.robosuite_env import RobosuiteEnv as E; e = E(env_name='Lift', robots='Panda'); e.reset(seed=0); e.step(e.action_space.sample()); e.close()")
	touch $@

train: setup
	$(BIN)/python scripts/train.py $(ARGS)

test: setup
	$(BIN)/ruff check .
	$(BIN)/pytest $(ARGS)
