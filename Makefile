# brainbot — see README.md. Everything a target needs it installs itself:
# Go modules through the module proxy, the Claude Code CLI from npm into the
# ignored .cache/ folder (pinned; reused when present).

SHELL         := /bin/bash
.SHELLFLAGS   := -eu -o pipefail -c

GO            ?= go
CLAUDE_VERSION := 2.1.328
CACHE         := $(CURDIR)/.cache
CLAUDE_PREFIX := $(CACHE)/claude-code-$(CLAUDE_VERSION)
# The npm package ships the native CLI in a per-platform package
# (@anthropic-ai/claude-code-linux-x64, -darwin-arm64, ...).
CLAUDE_PLATFORM := $(shell node -p 'process.platform + "-" + process.arch' 2>/dev/null || echo linux-x64)
CLAUDE_BIN    := $(CLAUDE_PREFIX)/node_modules/@anthropic-ai/claude-code-$(CLAUDE_PLATFORM)/claude
BIN           := $(CURDIR)/bin/brainbot

# The binary says what it is (brainbot version): the release tag or commit,
# and the full revision. Outside a git checkout, pass VERSION and REVISION.
VERSION       ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION      ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS       := -X main.version=$(VERSION) -X main.revision=$(REVISION)


.PHONY: all build test bench demo chat run doctor lint claude-cli dist deb deb-version clean

all: lint build test

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/brainbot

# No test reaches the internet: each brings its stand-ins, and these point
# anything that forgot one at a closed port on loopback, to fail fast.
OFFLINE := OPENAI_BASE_URL=http://127.0.0.1:9/v1 ANTHROPIC_BASE_URL=http://127.0.0.1:9 \
	TELEGRAM_API_URL=http://127.0.0.1:9 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1

# test runs everything: unit tests, the real-CLI integration tests and the
# end-to-end suite. -race because the bot is one big concurrency problem.
test: claude-cli
	$(OFFLINE) CLAUDE_CMD=$(CLAUDE_BIN) $(GO) test -race -count=1 -timeout 20m ./...

# bench measures our components (Go benchmarks) and the whole product
# through the real CLI (-benchtime 5x: medians of five requests each; the
# driver's spares, twenty new conversations and panels each; the same
# saturating load with spares on and off, BenchmarkSparesSaturated, once;
# a small server of 1 CPU and 2 GB, BenchmarkSmallServer, once a load,
# which needs root for its cgroups), then writes the report to
# docs/performance.md.
bench: claude-cli
	@mkdir -p $(CACHE)
	$(OFFLINE) $(GO) test -run '^$$' -bench . -benchmem ./bot/... ./output/... ./mcp/... | tee $(CACHE)/bench-components.txt
	$(OFFLINE) $(GO) test -run '^$$' -bench 'Parse|DriverOverhead' -benchmem ./claude/... | tee -a $(CACHE)/bench-components.txt
	$(OFFLINE) CLAUDE_CMD=$(CLAUDE_BIN) $(GO) test -run '^$$' -bench 'NewConversation|PanelTurns' -benchtime 20x -timeout 30m ./claude/ | tee -a $(CACHE)/bench-components.txt
	$(OFFLINE) CLAUDE_CMD=$(CLAUDE_BIN) $(GO) test -run '^$$' -bench . -benchtime 5x -timeout 60m ./cmd/brainbot | tee $(CACHE)/bench-e2e.txt
	$(GO) run ./cmd/internal/benchreport $(CACHE)/bench-components.txt $(CACHE)/bench-e2e.txt > docs/performance.md
	@cat docs/performance.md

# demo runs the example brains offline and prints what each bot answered.
demo: build claude-cli
	$(GO) run ./cmd/demo -brainbot $(BIN) -claude $(CLAUDE_BIN) -brains brains

# chat talks to one brain in the terminal (brainbot chat) against the
# offline stand-ins of make demo, with the real CLI: no token, no account.
# make chat BRAIN=brains/voice.yaml; CHAT_FLAGS="-chat group" and the like.
# bin/ goes first in PATH, as for run: brains/clock.yaml's tool is this build.
BRAIN         ?= brains/narrator.yaml
CHAT_FLAGS    ?=
chat: build claude-cli
	PATH=$(dir $(BIN)):$$PATH $(GO) run ./cmd/internal/offlinechat -brainbot $(BIN) -claude $(CLAUDE_BIN) -- $(CHAT_FLAGS) $(BRAIN)

# OPERATOR_DOCS is the operator's guide: its index and a page a task.
OPERATOR_DOCS := docs/operations.md docs/install.md docs/configure.md docs/observe.md docs/backup.md docs/security.md docs/troubleshoot.md

# staticcheck comes from the module proxy at a pinned version rather than
# from go.mod, so that the module's requirements stay what brainbot imports.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

# lint fails on unformatted code, vet and staticcheck findings, a go.mod
# or go.sum that `go mod tidy` would change, and a tracked program, large
# binary or patch leftover (.ci/check-tracked names it).
lint:
	@.ci/check-tracked
	@out=$$(gofmt -l . | grep -v '^.cache/' || true); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	@$(GO) mod tidy -diff || { echo "go.mod or go.sum is not tidy: run go mod tidy" >&2; exit 1; }

# run starts brainbot with the brains in ./brains and the pinned CLI (a
# CLAUDE_CMD in the environment wins); set the tokens named by their
# token_env and the keys (see README.md). doctor checks the same setup.
# bin/ goes first in PATH, so brains that start `brainbot mcp clock` (as
# brains/clock.yaml does) find this build.
CLAUDE_CMD ?= $(CLAUDE_BIN)
run doctor: build claude-cli
	PATH=$(dir $(BIN)):$$PATH CLAUDE_CMD=$(CLAUDE_CMD) $(BIN) $@

claude-cli: $(CLAUDE_BIN)

$(CLAUDE_BIN):
	@mkdir -p $(CLAUDE_PREFIX)
	npm install --prefix $(CLAUDE_PREFIX) --no-audit --no-fund --no-save --loglevel=error \
		@anthropic-ai/claude-code@$(CLAUDE_VERSION)
	@test -x $@ || { echo "Claude Code CLI not found at $@ after npm install" >&2; exit 1; }
	@touch $@

# dist builds the release tarball dist/brainbot-<version>-<os>-<arch>.tar.gz:
# a static, stamped binary, the example brains, the systemd unit and
# environment file, the Prometheus alert rules and Grafana dashboard, the
# docs, and SHA256SUMS of them all; the .sha256 file beside it checks the
# tarball. The same commit gives the same bytes. DIST_DIR moves it.
GOOS          ?= $(shell $(GO) env GOOS)
GOARCH        ?= $(shell $(GO) env GOARCH)
DIST_NAME     := brainbot-$(VERSION)-$(GOOS)-$(GOARCH)
DIST_DIR      ?= $(CURDIR)/dist
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)

# The files an admin installs beside the binary, kept in deploy/ (the
# tarball keeps the checkout's layout, so README's links work in it).
DEPLOY_FILES  := deploy/brainbot.service deploy/brainbot.env.example deploy/brainbot-alerts.yml deploy/brainbot-dashboard.json

# release-binary builds the static, stamped binary of a release at $(1).
define release-binary
CGO_ENABLED=0 GOOS=$(GOOS) GOARCH=$(GOARCH) $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o $(1) ./cmd/brainbot
endef

dist:
	rm -rf $(DIST_DIR)/$(DIST_NAME) $(DIST_DIR)/$(DIST_NAME).tar.gz $(DIST_DIR)/$(DIST_NAME).tar.gz.sha256
	mkdir -p $(addprefix $(DIST_DIR)/$(DIST_NAME)/,brains panels docs deploy)
	$(call release-binary,$(DIST_DIR)/$(DIST_NAME)/brainbot)
	cp brains/*.yaml brains/README.md $(DIST_DIR)/$(DIST_NAME)/brains/
	cp panels/*.yaml panels/README.md $(DIST_DIR)/$(DIST_NAME)/panels/
	cp $(DEPLOY_FILES) $(DIST_DIR)/$(DIST_NAME)/deploy/
	cp README.md CONTRIBUTING.md $(DIST_DIR)/$(DIST_NAME)/
	cp $(OPERATOR_DOCS) docs/architecture.md docs/scaling.md docs/performance.md $(DIST_DIR)/$(DIST_NAME)/docs/
	cd $(DIST_DIR)/$(DIST_NAME) && find . -type f ! -name SHA256SUMS | LC_ALL=C sort | sed 's|^\./||' | xargs sha256sum > SHA256SUMS
	tar -C $(DIST_DIR) --sort=name --owner=0 --group=0 --numeric-owner --mtime=@$(SOURCE_DATE_EPOCH) \
		-cf - $(DIST_NAME) | gzip -n > $(DIST_DIR)/$(DIST_NAME).tar.gz
	cd $(DIST_DIR) && sha256sum $(DIST_NAME).tar.gz > $(DIST_NAME).tar.gz.sha256
	@echo "$(DIST_DIR)/$(DIST_NAME).tar.gz"

# deb builds dist/brainbot_<version>_<arch>.deb with Debian's own dpkg-deb:
# the binary in /usr/bin, the unit (ExecStart pointed there), the example
# brains, panels and environment file, the alert rules and the dashboard;
# its maintainer scripts (deploy/debian/) make the brainbot system user and
# its folders, and install the environment file and the brains only where
# there are none yet, so an upgrade keeps them and the data.
DEB_ARCH      := $(shell dpkg --print-architecture 2>/dev/null || echo $(GOARCH))
# Successive builds' versions sort in build order, so each installs as an
# upgrade: v1.2.3 -> 1.2.3, 5 commits later 1.2.3+5.g<commit>, before any
# tag 0+<commits>.g<commit> (deploy/debian/version says how).
ifndef DEB_VERSION
DEB_VERSION   := $(shell sh deploy/debian/version '$(VERSION)')
endif
DEB_ROOT      := $(DIST_DIR)/deb-$(DEB_ARCH)
DEB_FILE      := $(DIST_DIR)/brainbot_$(DEB_VERSION)_$(DEB_ARCH).deb

deb:
	rm -rf $(DEB_ROOT) $(DEB_FILE)
	mkdir -p $(addprefix $(DEB_ROOT)/,DEBIAN usr/bin lib/systemd/system usr/share/brainbot/brains usr/share/brainbot/panels $(addprefix usr/share/doc/brainbot/,brains panels docs))
	$(call release-binary,$(DEB_ROOT)/usr/bin/brainbot)
	sed 's|^ExecStart=/usr/local/bin/brainbot|ExecStart=/usr/bin/brainbot|' deploy/brainbot.service > $(DEB_ROOT)/lib/systemd/system/brainbot.service
	cp deploy/brainbot.env.example deploy/brainbot-alerts.yml deploy/brainbot-dashboard.json $(DEB_ROOT)/usr/share/brainbot/
	cp brains/*.yaml $(DEB_ROOT)/usr/share/brainbot/brains/
	cp panels/*.yaml $(DEB_ROOT)/usr/share/brainbot/panels/
	cp README.md $(DEB_ROOT)/usr/share/doc/brainbot/
	cp brains/README.md $(DEB_ROOT)/usr/share/doc/brainbot/brains/
	cp panels/README.md $(DEB_ROOT)/usr/share/doc/brainbot/panels/
	cp $(OPERATOR_DOCS) docs/architecture.md docs/scaling.md $(DEB_ROOT)/usr/share/doc/brainbot/docs/
	sed -e 's|@VERSION@|$(DEB_VERSION)|' -e 's|@ARCH@|$(DEB_ARCH)|' deploy/debian/control > $(DEB_ROOT)/DEBIAN/control
	install -m 0755 deploy/debian/postinst deploy/debian/prerm deploy/debian/postrm $(DEB_ROOT)/DEBIAN/
	find $(DEB_ROOT) -exec touch -h -d @$(SOURCE_DATE_EPOCH) {} +
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) dpkg-deb --root-owner-group -Zxz --build $(DEB_ROOT) $(DEB_FILE)
	rm -rf $(DEB_ROOT)
	@echo "$(DEB_FILE)"

# deb-version prints the version make deb gives the package.
deb-version:
	@echo $(DEB_VERSION)

clean:
	rm -rf bin dist
