# minictl's everyday commands. `make up` starts a cluster; `make test` is
# the test command CI runs.
GO ?= go

.PHONY: up build dist test test-compat fuzz vet fmt bench bench-quick bench-micro bench-scale

up:
	$(GO) run ./cmd/minictl up

build:
	$(GO) build -o bin/minictl ./cmd/minictl

# dist cross-compiles static release binaries (no cgo) into dist/, one per
# platform, named minictl-<os>-<arch>, with their SHA256SUMS, and checks
# that each one the host can run prints its version. VERSION defaults to
# `git describe`; the binaries say it, and the commit, in minictl version.
DIST_PLATFORMS = linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
DIST_LDFLAGS = -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)

dist:
	rm -rf dist && mkdir -p dist
	for p in $(DIST_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; ext=; [ $$os = windows ] && ext=.exe; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "$(DIST_LDFLAGS)" \
			-o dist/minictl-$$os-$$arch$$ext ./cmd/minictl || exit 1; \
	done
	cd dist && sha256sum minictl-* > SHA256SUMS
	host=$$($(GO) env GOOS)-$$($(GO) env GOARCH); \
	for f in dist/minictl-*; do \
		case $$f in *-$$host|*-$$host.exe) $$f version | grep -q "minictl version: $(VERSION)" || { echo "$$f does not run version"; exit 1; }; echo "$$f runs: $$($$f version --short)";; \
		*) echo "$$f: built (this host cannot run it)";; esac; \
	done

# test runs every test of the main module with the race detector, each fuzz
# target for 10,000 inputs, then the compat module's tests, which build real
# kubectl and client-go programs and drive them against minictl up (the
# first build of kubectl takes minutes). The fuzz budget is a count, not a
# duration: Go 1.26's fuzzing coordinator can fail a target that found
# nothing with "context deadline exceeded" when a duration ends on a busy
# machine (go.dev/issue/75804, fixed in Go 1.27).
test:
	$(GO) test -race -count=1 -timeout 20m ./...
	$(MAKE) fuzz FUZZTIME=10000x
	cd compat && $(GO) test -count=1 -timeout 20m ./...

# fuzz runs each fuzz target of the request decoders, patches, selectors,
# continue tokens and the kubelet's command scripts for FUZZTIME, a duration
# or a count of inputs such as 10000x (Go fuzzes one target per
# invocation); test runs 10,000 inputs of each. The
# instrumented test binary of each package is built once. A crash is
# written under <package>/testdata/fuzz and from then on runs as a
# regression test with the package's tests.
FUZZTIME ?= 60s
FUZZ_TARGETS = FuzzDecodeJSON FuzzDecodeYAML FuzzDecodeProtobuf FuzzMergePatch \
	FuzzStrategicMergePatch FuzzJSONPatch FuzzLabelSelector FuzzFieldSelector FuzzContinueToken
# The kubelet's targets: the container command scripts it simulates.
KUBELET_FUZZ_TARGETS = FuzzScript

fuzz:
	$(GO) test -c -fuzz=. -o bin/apiserver.fuzz ./apiserver/
	cd apiserver && for t in $(FUZZ_TARGETS); do \
		../bin/apiserver.fuzz -test.run='^$$' -test.fuzz="^$$t\$$" -test.fuzztime=$(FUZZTIME) \
			-test.fuzzcachedir="$$($(GO) env GOCACHE)/fuzz/github.com/minictl/minictl/apiserver" || exit 1; \
	done
	$(GO) test -c -fuzz=. -o bin/kubelet.fuzz ./kubelet/
	cd kubelet && for t in $(KUBELET_FUZZ_TARGETS); do \
		../bin/kubelet.fuzz -test.run='^$$' -test.fuzz="^$$t\$$" -test.fuzztime=$(FUZZTIME) \
			-test.fuzzcachedir="$$($(GO) env GOCACHE)/fuzz/github.com/minictl/minictl/kubelet" || exit 1; \
	done

test-compat:
	cd compat && $(GO) test -count=1 -timeout 20m ./...

vet:
	$(GO) vet ./...

fmt:
	gofmt -l -w .

# bench measures minictl against the physical limit of this machine: every
# scenario starts bin/minictl and talks to it over loopback HTTP (see
# bench/doc.go). It prints a table, writes the same as JSON to
# bin/bench.json, and takes a few minutes. bench-quick is a fast look:
# smaller counts, one repetition. bench-micro runs the Go micro-benchmarks
# of the hot paths (codec, watch cache, informer, workqueue, scheduler,
# custom object validation).
bench: build
	$(GO) run ./bench -bin bin/minictl -json bin/bench.json

bench-quick: build
	$(GO) run ./bench -bin bin/minictl -quick -json bin/bench-quick.json

# bench-scale is the scale scenario alone, not part of bench (see
# bench/SCALE.md): for each step of SCALE_STEPS (pods/nodes) its own
# `minictl up --nodes N`, pods created through ReplicaSets at 100/s while
# Kubernetes' SLOs are measured, then memory and idle CPU at rest. Heap
# profiles go to bin/scale-<pods>.heap.pb.gz, figures to
# bin/bench-scale.json. Up to 15 minutes a step; `make bench-scale
# SCALE_STEPS=2000/500` is a quick look.
SCALE_STEPS ?= 15000/150,50000/500,150000/5000

bench-scale: build
	$(GO) run ./bench -bin bin/minictl -only scale -reps 1 -scale-steps $(SCALE_STEPS) -json bin/bench-scale.json

bench-micro:
	$(GO) test -run '^$$' -bench . -benchmem ./apiserver/ ./api/crd/ ./informer/... ./scheduler/
