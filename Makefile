# The two set-up commands (see README): `make demo` and `make test`.
# Both create .venv, install the package with TensorFlow (CPU) and what the
# tests need, and then run.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.tfdarshan-installed
SOURCES := pyproject.toml setup.py $(wildcard native/*.c native/*.h native/*.def native/*.py)

# Debian's Chromium and ChromeDriver for the tab's browser tests
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Two of Plotly's bundles for the tab (tfdarshan_tb/plugin.py, CHART_BUNDLES):
# basic (scatter and bar: every chart of a session but one) and cartesian
# (those and the heatmap, for a many-rank session's rank views), fetched
# from the npm registry, each checked against the hash it was published
# with, never committed. Without npm the tab falls back to the plotly
# package's larger bundle, so a failed fetch warns and goes on.
CHART_VER := 4.1.1
CHART_SHA_basic     := sha512-1oNF8PeQx2hv/y7tqEVWKD3JGwn/MGEMQ8mL9HUwsaqG9FGy/OU5FHUHvzqbqxN4mnwZGI9abTiE775C4kkjMQ==
CHART_SHA_cartesian := sha512-o8GrFeusncwBIxbBynRJpY4pkgVB6caM+JLpwrLYbbsO7dZ8FJ+SVN2Fr+L7kiG/Z6w4P5O0Jus/Qr5EefHVeg==
CHART_DIR := tfdarshan_tb/static/vendor
CHART_JS  := $(CHART_DIR)/plotly-basic.min.js $(CHART_DIR)/plotly-cartesian.min.js

.PHONY: demo test docs bench install browser system-deps case-studies clean charts npm-tool

install: $(STAMP) charts

charts: $(CHART_JS)

# npm, once for both bundles (two apt-get at once under make -j: one would fail on dpkg's lock)
npm-tool:
	@command -v npm >/dev/null || $(SUDO) apt-get install -y -q npm >/dev/null || true

# $* is the bundle's name: the npm package plotly.js-$*-dist-min holds package/plotly-$*.min.js
$(CHART_DIR)/plotly-%.min.js: | npm-tool
	@mkdir -p build/npm $(@D)
	@cd build/npm && pkg=plotly.js-$*-dist-min && rm -f $$pkg-*.tgz && npm pack -q $$pkg@$(CHART_VER) >/dev/null 2>&1 \
	  && [ "sha512-$$(openssl dgst -sha512 -binary $$pkg-$(CHART_VER).tgz | base64 -w0)" = "$(CHART_SHA_$*)" ] \
	  && tar -xzf $$pkg-$(CHART_VER).tgz -O package/plotly-$*.min.js > ../../$@.part \
	  && mv ../../$@.part ../../$@ \
	  || (rm -f ../../$@.part; echo "warning: could not fetch plotly.js-$*-dist-min@$(CHART_VER) from npm;" \
	      "the tab will use the plotly package's full bundle (slower to load)" >&2)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip setuptools wheel

$(STAMP): $(BIN)/python $(SOURCES)
	$(BIN)/pip install -q -e ".[tf-cpu,test,case-studies]"
	touch $@

demo: $(STAMP) charts
	$(BIN)/python -m tfdarshan demo --logdir demo_logs

# Debian packages: Chromium for the tab's browser tests, FUSE 3 (with
# libfuse3-dev and pkg-config, to build the case studies' slow tier,
# case_studies/slowfs.c), Open MPI for the multi-rank tests, gdb to read a crashed worker's core,
# strace to count the system calls the shim makes of its own
system-deps:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null && command -v mpirun >/dev/null && command -v gdb >/dev/null && \
	  command -v strace >/dev/null && \
	  command -v pkg-config >/dev/null && [ -e /usr/include/fuse3/fuse.h ] || \
	  ($(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q chromium chromium-driver gdb strace fuse3 libfuse3-dev pkg-config \
	     openmpi-bin libopenmpi-dev)

browser: system-deps

# one worker per core; a file's tests stay on one worker, so its module
# fixtures (a trained model, a multi-rank session, a TensorBoard) are made once
test: $(STAMP) system-deps charts
	$(BIN)/python -m pytest -q -n auto --dist loadfile

# the documentation site (mkdocs.yml; docs/hooks.py makes the CLI reference from
# the parsers): strict, so a broken link or a missing page fails the build
docs: $(STAMP)
	$(BIN)/python -m mkdocs build --strict --site-dir site

case-studies: $(STAMP) system-deps
	$(BIN)/python -m case_studies --scale small

# bench_peers.py runs DFTracer beside tfdarshan (the peers extra);
# bench_instructions.py needs valgrind; bench_slow_tier.py mounts a FUSE tier
bench: $(STAMP) browser charts
	@command -v valgrind >/dev/null || ($(SUDO) apt-get install -y -q valgrind)
	$(BIN)/pip install -q -e ".[tf-cpu,test,case-studies,peers]"
	$(BIN)/python benchmarks/bench_instructions.py
	$(BIN)/python benchmarks/bench_pread.py
	$(BIN)/python benchmarks/bench_hotpath.py
	$(BIN)/python benchmarks/bench_peers.py
	$(BIN)/python benchmarks/bench_log.py
	$(BIN)/python benchmarks/bench_joblog.py
	$(BIN)/python benchmarks/bench_analyze.py --runs 3
	$(BIN)/python benchmarks/bench_recommend.py
	$(BIN)/python benchmarks/bench_pipeline.py
	$(BIN)/python benchmarks/bench_tab.py
	$(BIN)/python benchmarks/bench_tab_ranks.py
	$(BIN)/python benchmarks/bench_ring.py
	$(BIN)/python benchmarks/bench_mapped.py
	$(BIN)/python benchmarks/bench_stage.py
	$(BIN)/python benchmarks/bench_staging.py
	$(BIN)/python benchmarks/bench_slow_tier.py

clean:
	rm -rf $(VENV) build site *.egg-info tfdarshan/_native_shim*.so demo_logs $(CHART_DIR)
