# eventd: `make run` starts a server on ./data, `make test` runs every test.
GO       ?= go
PKGS     := ./...
FUZZTIME ?= 30s

.PHONY: all build run test vet fmt-check unit e2e fuzz bench clean browser-deps chromium image

all: build

build:
	$(GO) build -o bin/eventd ./cmd/eventd

run: build
	./bin/eventd serve --data ./data

# test: static checks, then every package under the race detector (unit
# tests, fuzz seed corpora, and the end-to-end suite in ./test, which builds
# and starts the real binary on loopback), then the Go client and the trace
# reader, modules of their own (http/client/go.mod, tools/tracegaps/go.mod)
# that ./... does not reach.
test: vet fmt-check browser-deps
	$(GO) test -race -count=1 -timeout 20m $(PKGS)
	cd http/client && $(GO) test -race -count=1 -timeout 10m ./...
	cd tools/tracegaps && $(GO) test -race -count=1 -timeout 5m ./...

# browser-deps: what the browser tests (test/tjs_test.go, analytics.js in
# test/segment_browser_test.go, analytics-node in test/segment_test.go) need: Debian's
# chromium and test/browser's npm packages. Best effort: when either cannot be
# installed, that test skips and says why; the build does not fail for it.
browser-deps: chromium test/browser/node_modules/.package-lock.json

chromium:
	@if [ -n "$$EVENTD_CHROMIUM" ] || [ -x /usr/bin/chromium ]; then exit 0; fi; \
	if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		echo "installing chromium (apt-get) for the t.js browser test"; \
		{ timeout 600 apt-get update -qq && DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -qq chromium >/dev/null; } \
			|| echo "chromium could not be installed: the t.js browser test will skip"; \
	else \
		echo "no chromium and no root apt-get: the t.js browser test will skip"; \
	fi

# npm ci only when the lockfile changed, so a concurrent test run keeps its node_modules.
test/browser/node_modules/.package-lock.json: test/browser/package-lock.json test/browser/package.json
	@if command -v npm >/dev/null 2>&1; then \
		cd test/browser && { timeout 600 npm ci --no-audit --no-fund --loglevel=error \
			|| echo "npm ci failed in test/browser: the t.js browser test will skip"; }; \
	else \
		echo "npm not found: the t.js browser test will skip"; \
	fi

# image builds the container image (docs/deploy/Containerfile) FROM scratch:
# a static binary, the host's CA bundle, an empty /data; no base image is
# pulled, so no registry is needed. CONTAINER is podman (or docker).
CONTAINER ?= podman
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE     ?= localhost/eventd:$(VERSION)
CA_BUNDLE ?= /etc/ssl/certs/ca-certificates.crt
IMAGE_CTX ?= bin/image
BUILD_FLAGS ?=

image:
	rm -rf $(IMAGE_CTX) && mkdir -p $(IMAGE_CTX)/data
	CGO_ENABLED=0 $(GO) build -buildvcs=auto -trimpath \
		-ldflags "-s -w -X github.com/eventd/eventd/buildinfo.Version=$(VERSION)" \
		-o $(IMAGE_CTX)/eventd ./cmd/eventd
	@if [ -r "$(CA_BUNDLE)" ]; then cp "$(CA_BUNDLE)" $(IMAGE_CTX)/ca-certificates.crt; \
	else echo "no CA bundle at $(CA_BUNDLE): webhooks over HTTPS will fail in the image"; : > $(IMAGE_CTX)/ca-certificates.crt; fi
	$(CONTAINER) build $(if $(findstring podman,$(CONTAINER)),--format docker) $(BUILD_FLAGS) --build-arg VERSION=$(VERSION) \
		-f docs/deploy/Containerfile -t $(IMAGE) $(IMAGE_CTX)
	@echo "built $(IMAGE)"

vet:
	$(GO) vet $(PKGS)
	cd http/client && $(GO) vet ./...
	cd tools/tracegaps && $(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

unit:
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /test$$)

e2e:
	$(GO) test -race -count=1 ./test/

# fuzz runs each fuzz target for FUZZTIME; new crashers land in testdata/fuzz.
fuzz:
	$(GO) test ./engine/event/ -run='^$$' -fuzz=FuzzDecodeSingle -fuzztime=$(FUZZTIME)
	$(GO) test ./engine/event/ -run='^$$' -fuzz=FuzzDecodeBatch -fuzztime=$(FUZZTIME)
	$(GO) test ./engine/event/ -run='^$$' -fuzz=FuzzDecodeImport -fuzztime=$(FUZZTIME)
	$(GO) test ./engine/ratelimit/ -run='^$$' -fuzz=FuzzUnmarshalBinary -fuzztime=$(FUZZTIME)
	$(GO) test ./storage/ -run='^$$' -fuzz=FuzzDecodeRecord -fuzztime=$(FUZZTIME)

# bench runs the default scenario set, on a fresh store and again after
# loading 5 million events (6-7 minutes), and writes
# bench-results.json; see docs/benchmarks.md.
bench:
	$(GO) run ./cmd/eventd-bench $(BENCHFLAGS)

clean:
	rm -rf bin bench-results.json bench-report.html
