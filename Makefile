# burrowpy: set-up, demo and tests. `make run` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEBIAN_PACKAGES := zookeeper kcat burrow
STAMP := $(VENV)/.installed
# Test peers: Apache Kafka, its tools, the Java client and Kafka Streams (Maven), and Go programs
# using Sarama, franz-go and kafka-go (Go module proxy); both cached in ~/.m2 and Go's module cache.
JAVA_PEERS := tests/peers/java
JAVA_STAMP := $(JAVA_PEERS)/target/.installed
GO_PEERS := tests/peers/go
GO_STAMP := $(GO_PEERS)/bin/.installed

.PHONY: install run test unit integration lint bench clean

# The Go peers join the install once their module exists.
install: $(STAMP) $(JAVA_STAMP) $(if $(wildcard $(GO_PEERS)/go.mod),$(GO_STAMP))

$(STAMP): pyproject.toml tests/js/package.json
	@if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
		missing=""; \
		for p in $(DEBIAN_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
		command -v java >/dev/null || missing="$$missing default-jre-headless"; \
		command -v node >/dev/null || missing="$$missing nodejs npm"; \
		command -v mvn >/dev/null || missing="$$missing maven"; \
		if [ -n "$$missing" ]; then \
			echo "installing Debian packages:$$missing"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
		fi; \
	fi
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,spark]'
	cd tests/js && npm install --silent --no-audit --no-fund
	touch $(STAMP)

$(JAVA_STAMP): $(JAVA_PEERS)/pom.xml $(shell find $(JAVA_PEERS)/src -type f)
	mvn -q -B -f $(JAVA_PEERS)/pom.xml package
	touch $@

$(GO_STAMP): $(GO_PEERS)/go.mod $(GO_PEERS)/go.sum $(shell find $(GO_PEERS) -name '*.go' 2>/dev/null)
	cd $(GO_PEERS) && go build -o bin/ ./cmd/...
	touch $@

run: $(STAMP)
	$(BIN)/burrowpy demo

test: install
	$(BIN)/ruff check .
	$(BIN)/pytest -q -p no:cacheprovider

unit: install
	$(BIN)/pytest -q tests/unit

integration: install
	$(BIN)/pytest -q tests/integration

lint: install
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) tests/js/node_modules build *.egg-info $(JAVA_PEERS)/target $(GO_PEERS)/bin
