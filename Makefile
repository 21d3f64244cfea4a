# Build targets for `sam build` (template.yaml: Metadata BuildMethod makefile).
# SAM copies the source tree, then runs `make build-<LogicalId>` with
# ARTIFACTS_DIR set; each target writes the function's `bootstrap` there.
# Functions run on provided.al2023 / arm64: static, no cgo, no RPC shim
# (lambda.norpc), stripped.

GO          ?= go
GOFLAGS_FN  := -tags lambda.norpc -trimpath -ldflags='-s -w'
GOENV_FN    := GOOS=linux GOARCH=arm64 CGO_ENABLED=0

.PHONY: build-GatewayFunction build-AdminFunction build lint-template

build-GatewayFunction:
	@test -n "$(ARTIFACTS_DIR)" || { echo "ARTIFACTS_DIR is not set: sam build sets it (or run make build)"; exit 1; }
	$(GOENV_FN) $(GO) build $(GOFLAGS_FN) -o $(ARTIFACTS_DIR)/bootstrap ./functions/gateway

build-AdminFunction:
	@test -n "$(ARTIFACTS_DIR)" || { echo "ARTIFACTS_DIR is not set: sam build sets it (or run make build)"; exit 1; }
	$(GOENV_FN) $(GO) build $(GOFLAGS_FN) -o $(ARTIFACTS_DIR)/bootstrap ./functions/admin

# Both bootstraps into bin/<function>/ (what sam build would produce), for
# checking sizes without SAM.
build:
	$(MAKE) build-GatewayFunction ARTIFACTS_DIR=$(CURDIR)/bin/gateway
	$(MAKE) build-AdminFunction ARTIFACTS_DIR=$(CURDIR)/bin/admin

lint-template:
	cfn-lint template.yaml
