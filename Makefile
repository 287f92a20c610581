# brainbot — see README.md. Everything a target needs it installs itself:
# Go modules through the module proxy, the Claude Code CLI from npm into the
# ignored .cache/ folder (pinned; reused when present).

GO            ?= go
CLAUDE_VERSION := 2.1.328
CACHE         := $(CURDIR)/.cache
CLAUDE_PREFIX := $(CACHE)/claude-code-$(CLAUDE_VERSION)
# The npm package ships the native CLI in a per-platform package
# (@anthropic-ai/claude-code-linux-x64, -darwin-arm64, ...).
CLAUDE_PLATFORM := $(shell node -p 'process.platform + "-" + process.arch' 2>/dev/null || echo linux-x64)
CLAUDE_BIN    := $(CLAUDE_PREFIX)/node_modules/@anthropic-ai/claude-code-$(CLAUDE_PLATFORM)/claude
BIN           := $(CURDIR)/bin/brainbot


.PHONY: all build test bench demo run lint claude-cli clean

all: lint build test

build:
	$(GO) build -o $(BIN) ./cmd/brainbot

# test runs everything: unit tests, the real-CLI integration tests and the
# end-to-end suite. -race because the bot is one big concurrency problem.
test: claude-cli
	CLAUDE_CMD=$(CLAUDE_BIN) $(GO) test -race -count=1 -timeout 20m ./...

bench: claude-cli
	CLAUDE_CMD=$(CLAUDE_BIN) $(GO) test -run '^$$' -bench . -benchmem -benchtime 1x -count 1 ./... | tee $(CACHE)/bench.txt

# demo runs the example brains offline and prints what each bot answered.
demo: build claude-cli
	$(GO) run ./cmd/demo -brainbot $(BIN) -claude $(CLAUDE_BIN) -brains brains

lint:
	@out=$$(gofmt -l . | grep -v '^.cache/' || true); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# run starts brainbot with the brains in ./brains; set the tokens named by
# their token_env, OPENAI_API_KEY, and CLAUDE_CMD (see README.md).
run: build
	$(BIN) run

claude-cli: $(CLAUDE_BIN)

$(CLAUDE_BIN):
	@mkdir -p $(CLAUDE_PREFIX)
	npm install --prefix $(CLAUDE_PREFIX) --no-audit --no-fund --no-save --loglevel=error \
		@anthropic-ai/claude-code@$(CLAUDE_VERSION)
	@test -x $@ || { echo "Claude Code CLI not found at $@ after npm install" >&2; exit 1; }
	@touch $@

clean:
	rm -rf bin
