# minictl's everyday commands. `make up` starts a cluster; `make test` is
# the test command CI runs.
GO ?= go

.PHONY: up build test vet fmt bench

up:
	$(GO) run ./cmd/minictl up

build:
	$(GO) build -o bin/minictl ./cmd/minictl

test:
	$(GO) test -race -count=1 -timeout 20m ./...

vet:
	$(GO) vet ./...

fmt:
	gofmt -l -w .
