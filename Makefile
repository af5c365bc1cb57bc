GO ?= go
PKGS := ./...

.PHONY: build test bench bench-e2e lint run run-bandit fuzz

build:
	$(GO) build $(PKGS)

# The README's test command; .ci/run calls it on a clean clone.
test:
	$(GO) vet $(PKGS)
	$(GO) test -timeout 14m -count=1 $(PKGS)

# Learner micro-benchmarks (figures published in README.md).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 2000x ./models/... ./internal/linalg/...

lint:
	@test -z "$$(gofmt -l . | tee /dev/stderr)" || (echo "gofmt needed" && exit 1)
	$(GO) vet $(PKGS)

run:
	$(GO) run ./cmd/consumer -demo

# End-to-end pipeline benchmark on an embedded broker: kernelstream with a
# cheap learner next to a bare kafka-go relay (figures in docs/operations.md).
bench-e2e:
	$(GO) run ./cmd/benche2e
