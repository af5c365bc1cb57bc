GO ?= go
PKGS := ./...

.PHONY: build test race bench bench-e2e bench-decisions bench-keys lint run run-bandit fuzz image broker soak

build:
	$(GO) build $(PKGS)

# The README's test command; .ci/run calls it on a clean clone. The
# manifests' checks are a module of their own (deployments/k8s/go.mod: the
# Kubernetes API and kustomize stay out of the service's module); they run
# beside the service's suite.
K8S := deployments/k8s
test:
	$(GO) vet $(PKGS)
	cd $(K8S) && $(GO) vet ./...
	@log=$$(mktemp); (cd $(K8S) && $(GO) test -count=1 ./... >$$log 2>&1) & k8s=$$!; \
	$(GO) test -timeout 14m -count=1 $(PKGS); rc=$$?; \
	wait $$k8s; k8src=$$?; cat $$log; rm -f $$log; exit $$((rc || k8src))

# The scoring path under the race detector: POST /v1/score reads learner
# state through the worker that owns it, concurrently with the stream
# (processor/score.go). Not in make test: a race build of the processor's
# dependencies alone takes longer than the suite's minute.
race:
	$(GO) test -race -count=1 -run 'Score|Handler|Forward|Statuses' ./processor ./internal/scoring

# Learner micro-benchmarks (figures published in README.md).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 2000x ./models/... ./internal/linalg/...

lint:
	@test -z "$$(gofmt -l . | tee /dev/stderr)" || (echo "gofmt needed" && exit 1)
	$(GO) vet $(PKGS)
	cd $(K8S) && $(GO) vet ./...

run:
	$(GO) run ./cmd/demo

# The embedded broker alone, with the topics of CONFIG, on 127.0.0.1:19092,
# for trying the service by hand (README, "Try the service").
CONFIG ?= examples/local.yaml
broker:
	$(GO) run ./cmd/broker -config $(CONFIG)

# End-to-end pipeline benchmark on an embedded broker: kernelstream with a
# cheap learner next to bare kafka-go and franz-go relays (method in
# docs/operations.md, figures in README.md).
bench-e2e:
	$(GO) run ./cmd/benche2e

# Decision latency on the embedded broker: bkb (dim 16) per user, 10,000
# users, 100 candidates per decision, 2,000 decisions/s for DECISION_SECONDS,
# rewards as in the bandit demo; p50/p99/max latency, achieved rates and
# CPU (figures in README.md and docs/bandits.md).
DECISION_SECONDS ?= 60
bench-decisions:
	$(GO) run ./cmd/benche2e -decisions -latency-seconds $(DECISION_SECONDS)

# Many-keys benchmark: the consumer process with 1,000,000 distinct keys and
# cache.max_learners 50,000, next to 10,000 keys: records/s and peak resident
# memory (figures in docs/scale.md). Takes several minutes.
bench-keys:
	$(GO) run ./cmd/benchkeys

# The recommendation demo: decisions answered by BKB per user, clicks from a
# simulated audience (users who like items near an ideal point; `go run
# ./cmd/demo bandit -audience linear` for a linear one), live click rate
# against random choice and LinUCB on the same offers (docs/bandits.md).
run-bandit:
	$(GO) run ./cmd/demo bandit

# Runs every fuzz target for FUZZTIME each (make test runs their seed corpora).
FUZZTIME ?= 30s
fuzz:
	$(GO) test ./models -run '^$$' -fuzz '^FuzzLearnerState$$' -fuzztime $(FUZZTIME)
	$(GO) test ./models -run '^$$' -fuzz '^FuzzStateReader$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/wire -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/wire -run '^$$' -fuzz '^FuzzNumber$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/wire -run '^$$' -fuzz '^FuzzDecodeQuery$$' -fuzztime $(FUZZTIME)
	$(GO) test ./changelog -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME)
	$(GO) test ./checkpoint -run '^$$' -fuzz '^FuzzAppendStaged$$' -fuzztime $(FUZZTIME)
	$(GO) test ./processor -run '^$$' -fuzz '^FuzzMetaSpecHash$$' -fuzztime $(FUZZTIME)
	$(GO) test ./config -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/dataset -run '^$$' -fuzz '^FuzzReadLIBSVM$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/dataset -run '^$$' -fuzz '^FuzzReadCSV$$' -fuzztime $(FUZZTIME)

# The container image of the consumer (Dockerfile); push it with
# `docker push $(IMAGE):$(VERSION)` (docs/deploy.md).
IMAGE ?= ghcr.io/kernelstream/kernelstream-consumer
VERSION ?= devel
image:
	docker build --build-arg VERSION=$(VERSION) -t $(IMAGE):$(VERSION) .

# Soak: the README's configuration and the demo's other two models, each a
# consumer process, at 2,000 feature records/s for SOAK_MINUTES against the
# embedded broker; samples state directory, live state and resident memory
# every 10 s and checks their bounds (docs/soak.md).
SOAK_MINUTES ?= 30
soak:
	$(GO) run ./cmd/soak -minutes $(SOAK_MINUTES) -out soak.csv
