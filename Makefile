# vramscope — two commands do all set-up on a fresh machine:
#   make demo   analyse the bundled example snapshot, print the summary, write the flame graph
#   make test   install what the tests need and run every test
GO      ?= go
BIN     := bin/vramscope
EXAMPLE := examples/snapshots/example_train.pickle
# Where examples/record/record_examples.py ran when the bundled snapshots were
# recorded: the demo reads those files from this checkout instead.
RECORDED := /work/main
SHARED  ?= ../shared

.PHONY: all build generate test-race lint golden dist test-dist demo test clean-artifacts setup test-go test-web test-py test-fixtures test-vscode test-mcp bench bench-lsp bench-widget bench-page bench-hosts fuzz gpu-e2e clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/vramscope

# The files generated from the daemon's API contract (daemon/api) and the
# language server's commands (lsp/command): docs/api.md,
# jupyter/vramscope/_api.py, vscode-ext/src/api.ts and vscode-ext/src/commands_gen.ts
# (internal/wiregen; go test ./internal/wiregen fails when one is stale).
generate:
	$(GO) generate ./daemon/api

demo: build
	$(BIN) analyze --map $(RECORDED)=$(CURDIR) --root . --html example_flame.html $(EXAMPLE)

# What users install, in dist/: platform wheels carrying the engine (manylinux
# x86_64 and aarch64, macOS arm64 and x86_64), the sdist, and a .vsix per
# target (deploy/dist/dist.py; docs/install.md).
dist:
	python3 deploy/dist/dist.py --out dist

# setup installs the test dependencies from the project's own files: Go modules
# (go.sum), the npm workspace (package-lock.json), the Python packages (Neovim
# among them, for the editor test), Debian's chromium for the real-browser
# tests, Debian's prometheus for the daemon's scrape test, Debian's Emacs
# with eglot for the Emacs test (only when missing, and only as root), and
# .venv-torch for the trainer callbacks' and the tensor walk's CPU tests:
# Debian's python3-torch (CPU only) under Debian's python3 with transformers,
# Lightning, peft and pytest pinned in jupyter/requirements-torch.txt
# (installed --no-deps: the file says why), and
# for the Helix test Debian's tmux and, in .helix, Debian 13's hx with its libc
# (lsp/testdata/helix/install.sh says why).
setup:
	$(GO) mod download
	npm ci --no-audit --no-fund
	test -x .venv/bin/python || python3 -m venv .venv
	.venv/bin/pip install -q --disable-pip-version-check -e './jupyter[test,notebook]' -r jupyter/requirements-test.txt
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "install Debian's chromium (apt-get install chromium) for the browser tests" >&2; exit 1; fi; }
	@{ command -v rg >/dev/null 2>&1 && test -e /usr/include/krb5.h; } || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libkrb5-dev ripgrep >/dev/null; \
	  else echo "install Debian's libkrb5-dev and ripgrep (apt-get install libkrb5-dev ripgrep) for code-server" >&2; exit 1; fi; }
	@command -v prometheus >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null; \
	  else echo "install Debian's prometheus (apt-get install prometheus) for the daemon's scrape test" >&2; exit 1; fi; }
	@emacs --batch -q --eval "(progn (require 'package) (package-initialize) (require 'eglot))" >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends emacs-nox elpa-eglot >/dev/null; \
	  else echo "install Debian's emacs-nox and elpa-eglot (apt-get install emacs-nox elpa-eglot) for the Emacs test" >&2; exit 1; fi; }
	@/usr/bin/python3 -c 'import torch, venv' >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-torch python3-venv >/dev/null; \
	  else echo "install Debian's python3-torch and python3-venv (apt-get install python3-torch python3-venv) for the trainer tests" >&2; exit 1; fi; }
	test -x .venv-torch/bin/python || /usr/bin/python3 -m venv --system-site-packages .venv-torch
	.venv-torch/bin/pip install -q --disable-pip-version-check --no-deps -r jupyter/requirements-torch.txt
	@command -v tmux >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >/dev/null; \
	  else echo "install Debian's tmux (apt-get install tmux) for the Helix test" >&2; exit 1; fi; }
	sh lsp/testdata/helix/install.sh .helix
	sh vscode-ext/test/code-server/install.sh

test: clean-artifacts setup test-go test-race lint test-web test-py test-mcp test-dist test-fixtures test-vscode

# Screenshots and logs of this run only (the browser tests write them).
ARTIFACTS ?= $(or $(VRAMSCOPE_ARTIFACTS),test-artifacts)
clean-artifacts:
	rm -rf '$(ARTIFACTS)'

test-go:
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "not gofmt-ed: $$out" >&2; exit 1; fi
	$(GO) vet ./...
	$(GO) test ./...

# The race detector on the concurrent parts: the daemon (sessions, agents,
# the store, streams), the language server, and the stream decoders.
test-race:
	$(GO) test -race ./daemon/... ./lsp/... ./profiler/torchsnap/... ./profiler/marshal/...

# staticcheck (pinned here; go run fetches it once into the module cache) and
# ruff (pinned in jupyter/requirements-test.txt, configured in ruff.toml).
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint:
	$(GO) run $(STATICCHECK) ./...
	.venv/bin/ruff check .

# Rewrites every golden file from the current output (the tests' -update flag,
# in each package whose tests use internal/golden); look at git diff after.
golden:
	$(GO) test -count=1 $$(grep -rl --include='*_test.go' -e 'golden\.Update' -e 'golden\.Check' . | xargs -n1 dirname | sort -u) -update

test-web:
	node --test profiler/flame/web/

# The Python agent: real child processes on a real Unix socket, a fake torch
# for the torch-facing parts (the GPU run is make gpu-e2e); the trainer
# callbacks in real transformers and Lightning trainers on CPU with
# .venv-torch's interpreter (test_trainers.py), and the tensor walk's routes
# on real CPU tensors under that interpreter's pytest (test_tensors_torch.py).
test-py: build
	.venv/bin/python -m pytest -q jupyter/tests

# The MCP server against the official conformance suite (pinned in
# package.json; the scenarios it fails on purpose, and why, are in
# cmd/vramscope/mcp/conformance/expected-failures.yml); results in $(ARTIFACTS)/mcp.
# The Go tests drive it over stdio and the Python mcp SDK's session is in test-py.
test-mcp: build
	sh cmd/vramscope/mcp/conformance/run.sh $(BIN) '$(ARTIFACTS)/mcp'

# make dist, then: make dist's preflight on a fresh git clone (deploy/dist/fresh.py), and each wheel's tags and engine header, the x86_64 wheel
# installed offline into a fresh venv without Go (vramscope analyze, %vramscope
# open through nbclient), each .vsix's files and engine header (deploy/dist/check.py).
test-dist: dist
	python3 deploy/dist/fresh.py
	PATH="$(CURDIR)/.venv/bin:$$PATH" python3 deploy/dist/check.py --dist dist

# The shared fixture facts (peak within 1%, top user line, no false alarms).
test-fixtures: build
	python3 $(SHARED)/checks/fixtures.py $(BIN)

# The VS Code extension: tsc over its sources (the daemon's and the language
# server's types are generated from Go: a renamed field fails here); which server it starts (its engine, PATH's, or a message
# saying what to install); then packages the .vsix and checks it, and runs it in
# code-server (VS Code 1.100.3) with headless chromium; screenshots in test-artifacts/vscode and
# test-artifacts/vscode-report (one code-server at a time: two node --test runs, not one).
test-vscode: build
	npm run typecheck -w vscode-ext
	node --test vscode-ext/test/server.test.mjs vscode-ext/test/ranks.test.mjs vscode-ext/test/treeid.test.mjs vscode-ext/test/format.test.mjs
	VRAMSCOPE_SHARED=$(SHARED) node --test vscode-ext/test/e2e.test.mjs
	VRAMSCOPE_SHARED=$(SHARED) node --test vscode-ext/test/report.test.mjs

# Large-snapshot benchmarks beside python3 pickle.load; writes docs/benchmarks.md (KEEP=1 keeps the 50M file).
bench:
	go run ./bench $(BENCHFLAGS)
	.venv/bin/python jupyter/tests/bench_vsm.py

# Language-server latency on the 1M-entry snapshot (make bench runs it too, after decompressing the snapshot); writes docs/lsp-bench.md.
bench-lsp: build
	go run ./bench/lspbench

# The linked report page (analyze --html) on the 1M and 5M snapshots in chromium: size, time to interactive,
# renderer memory, click -> flame, beside the flame-only page and the raw JSON; writes docs/page-bench.md.
bench-page: build
	node bench/page.mjs

# The same report in the notebook widget (JupyterLab 4, a real kernel) and the VS Code webview (code-server,
# the packaged .vsix) on the 1M and 5M shared snapshots, beside the page in the same run: open -> report drawn,
# renderer memory, click -> flame; appends its table to docs/page-bench.md.
bench-hosts: build
	node bench/hosts.mjs

# The notebook widget's 100k-node render in JupyterLab + chromium (make setup first); writes docs/widget-bench.md.
bench-widget: build
	VRAMSCOPE_WIDGET_BENCH=docs/widget-bench.md .venv/bin/python -m pytest -q -s jupyter/tests/test_lab.py -k jupyterlab

# On a machine with an NVIDIA GPU and PyTorch (the device machine has no Go:
# build bin/vramscope here and carry it): daemon + agent + capture + OOM, and
# the GPU benchmarks; results in $(GPU_OUT), copied into docs/gpu-e2e.* by hand.
GPU_OUT ?= gpu-e2e-out
gpu-e2e:
	@test -x $(BIN) || $(MAKE) build
	python3 examples/e2e/gpu_e2e.py --bin $(BIN) --out $(GPU_OUT)

# Every fuzzer in the repository (each func Fuzz* in a test file), one after
# another for FUZZTIME each (make fuzz FUZZTIME=5m for a longer run); new
# crashers land in testdata/fuzz/ and plain go test replays them.
FUZZTIME ?= 10s
fuzz:
	@set -e; for dir in $$(grep -rl --include='*_test.go' --exclude-dir=node_modules '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
	  for f in $$(grep -h '^func Fuzz' $$dir/*_test.go | sed 's/^func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
	    echo "fuzz: $$dir $$f for $(FUZZTIME)"; \
	    $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$dir; \
	  done; \
	done

clean:
	rm -rf bin dist example_flame.html test-artifacts .bench .venv .venv-torch .helix gpu-e2e-out
