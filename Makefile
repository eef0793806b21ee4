# hookgate: the two set-up commands are `make run` and `make test`.
GO       ?= go
BIN      := bin/hookgate
CONFIG   ?= examples/hookgate.yaml
PKGS     := ./...
FUZZTIME ?= 20s

.PHONY: build run test e2e fuzz bench lint tidy-check clean

build:
	$(GO) build -o $(BIN) ./cmd/hookgate

## run: gateway + consumers on the embedded NATS server, example config
run: build
	./$(BIN) serve --config $(CONFIG)

## test: every test, race detector on (the README's test command; .ci/run calls it)
test:
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

## e2e: only the black-box tests that run the built binary
e2e:
	$(GO) test -race -count=1 -timeout 15m ./e2e/...

## fuzz: every fuzz target for FUZZTIME each; findings land in testdata/fuzz
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$t"; \
	    $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

## bench: benchmarks with allocations
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

lint:
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet $(PKGS)

tidy-check:
	$(GO) mod tidy
	git diff --exit-code go.mod go.sum

clean:
	rm -rf bin
