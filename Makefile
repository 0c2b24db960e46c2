# oncesync developer targets. `make` (or `make help`) lists them.
#
# Targets that need PostgreSQL/Redis run under scripts/test-services.sh, which reuses running servers
# (127.0.0.1:5432, 127.0.0.1:6379, or ONCESYNC_TEST_DATABASE_URL / ONCESYNC_TEST_REDIS_URL) or starts
# throwaway ones on free ports, and stops only what it started.

GO        ?= go
SERVICES  := bash scripts/test-services.sh
FUZZTIME  ?= 10s
TESTFLAGS ?=
CHAOS_ARGS ?=

.DEFAULT_GOAL := help

.PHONY: help build test vet lint bench chaos fuzz demo clean

help: ## List targets
	@echo 'Usage: make <target>'
	@echo
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | \
		awk 'BEGIN {FS = ":.*## "}; {printf "  %-8s %s\n", $$1, $$2}'
	@echo
	@echo 'Variables: FUZZTIME (fuzz, default 10s), TESTFLAGS (extra go test flags), CHAOS_ARGS (chaos).'

build: ## Build bin/oncesync
	$(GO) build -o bin/oncesync ./cmd/oncesync

vet: ## go vet ./...
	$(GO) vet ./...

test: ## Build, vet, then run all tests with -race against PostgreSQL + Redis
	$(GO) build ./...
	$(GO) vet ./...
	$(SERVICES) run -- $(GO) test -race -count=1 -timeout 15m $(TESTFLAGS) ./...

lint: ## gofmt -l, go vet, staticcheck (only if installed)
	bash scripts/lint.sh

bench: ## Run benchmarks (scripts/bench.sh if present)
	@if [ -f scripts/bench.sh ]; then \
		$(SERVICES) run -- bash scripts/bench.sh; \
	else \
		$(SERVICES) run -- $(GO) test -run '^$$' -bench . -benchmem ./...; \
	fi

chaos: ## Run the chaos harness (cmd/oncesync-chaos)
	@if [ -d cmd/oncesync-chaos ]; then \
		$(SERVICES) run -- $(GO) run ./cmd/oncesync-chaos $(CHAOS_ARGS); \
	else \
		echo 'chaos: cmd/oncesync-chaos is not built yet' >&2; exit 1; \
	fi

fuzz: ## Run every Fuzz target for FUZZTIME each (default 10s)
	@targets=$$(grep -rE --include='*_test.go' --exclude-dir=vendor --exclude-dir=testdata --exclude-dir=.git \
		'^func Fuzz[A-Za-z0-9_]*\(' . | sed -E 's|^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*|\1 \2|' | sort -u); \
	if [ -z "$$targets" ]; then echo 'fuzz: no Fuzz targets found'; exit 0; fi; \
	echo "$$targets" | while read -r dir name; do \
		echo "==> $$dir $$name ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) "$$dir" || exit 1; \
	done

demo: ## Run the end-to-end demo on embedded defaults
	$(GO) run ./cmd/oncesync demo

clean: ## Remove build output
	rm -rf bin
