# eventd: `make run` starts a server on ./data, `make test` runs every test.
GO       ?= go
PKGS     := ./...
FUZZTIME ?= 30s

.PHONY: all build run test vet fmt-check unit e2e fuzz bench clean

all: build

build:
	$(GO) build -o bin/eventd ./cmd/eventd

run: build
	./bin/eventd serve --data ./data

# test: static checks, then every package under the race detector (unit
# tests, fuzz seed corpora, and the end-to-end suite in ./test, which builds
# and starts the real binary on loopback).
test: vet fmt-check
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

vet:
	$(GO) vet $(PKGS)

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
	$(GO) test ./engine/ratelimit/ -run='^$$' -fuzz=FuzzUnmarshalBinary -fuzztime=$(FUZZTIME)
	$(GO) test ./storage/ -run='^$$' -fuzz=FuzzDecodeRecord -fuzztime=$(FUZZTIME)

# bench runs the default scenario set (about 2 minutes) and writes
# bench-results.json; see docs/benchmarks.md.
bench:
	$(GO) run ./cmd/eventd-bench $(BENCHFLAGS)

clean:
	rm -rf bin bench-results.json bench-report.html
