# burrowpy: set-up, demo and tests. `make run` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# chromium and its driver for the dashboard's browser tests; prometheus for promtool (alert rules check).
DEBIAN_PACKAGES := zookeeper kcat burrow chromium chromium-driver prometheus iproute2
STAMP := $(VENV)/.installed
# Test peers: Apache Kafka, its tools, the Java client and Kafka Streams (Maven), and Go programs
# using Sarama, franz-go and kafka-go (Go module proxy); both cached in ~/.m2 and Go's module cache.
# Spark's Kafka source for `burrowpy spark` (a run-time dependency, not only a test peer): its jars go into
# the virtualenv, where the pipeline finds them.
SPARK_JARS := $(VENV)/spark-jars
SPARK_STAMP := $(SPARK_JARS)/.installed
SPARK_CONNECTOR_JARS := spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2
JAVA_PEERS := tests/peers/java
JAVA_STAMP := $(JAVA_PEERS)/target/.installed
GO_PEERS := tests/peers/go
# The Prometheus JMX exporter java agent, which tests start Kafka with to read share-partitions' in-flight counts
# (config/kafka-share-jmx-exporter.yml); from Maven Central, cached in ~/.m2 like the Java peers.
JMX_EXPORTER_VERSION := 1.0.1
JMX_EXPORTER := tests/peers/jmx-exporter/jmx_prometheus_javaagent.jar
CONFIG_DOCS := broker/kafka_config_docs.json
GO_STAMP := $(GO_PEERS)/bin/.installed
# Test peers built from source once per machine, outside the checkout, so that a fresh clone reuses them (as it
# reuses Maven's and Go's caches) and needs their git snapshots only for the first build.
PEER_CACHE ?= $(HOME)/.cache/burrowpy
# The current Burrow, for side-by-side tests and benches: from the Go module proxy when it serves
# github.com/linkedin/Burrow, else built from a git snapshot of its repository (BURROW_GIT).
BURROW_PEER := tests/peers/burrow
BURROW_STAMP := $(BURROW_PEER)/bin/.installed
BURROW_GIT ?= $(firstword $(wildcard $(abspath ../.mirror/linkedin+Burrow/repo)))
BURROW_CACHE ?= $(PEER_CACHE)/burrow-current
# librdkafka's own test programs (0081, the Admin API; 0082, fetch.max.bytes), run against our broker: built
# from a git snapshot of confluentinc/librdkafka (LIBRDKAFKA_GIT) at LIBRDKAFKA_TAG, the release Debian's kcat
# links; without a snapshot or an earlier build their tests skip.
LIBRDKAFKA_PEER := tests/peers/librdkafka
LIBRDKAFKA_STAMP := $(LIBRDKAFKA_PEER)/.installed
LIBRDKAFKA_GIT ?= $(firstword $(wildcard $(abspath ../.mirror/confluentinc+librdkafka/repo)))
LIBRDKAFKA_TAG ?= v2.0.2
LIBRDKAFKA_CACHE ?= $(PEER_CACHE)/librdkafka-$(LIBRDKAFKA_TAG)
LIBRDKAFKA_BUILD_DEPS := gcc g++ make libssl-dev zlib1g-dev

.PHONY: install run test unit integration lint bench clean ui-vendor

# The Go peers join the install once their module exists.
install: $(STAMP) $(SPARK_STAMP) $(JAVA_STAMP) $(JMX_EXPORTER) $(if $(wildcard $(GO_PEERS)/go.mod),$(GO_STAMP)) $(BURROW_STAMP) \
	$(LIBRDKAFKA_STAMP) $(CONFIG_DOCS)
	@# Bytecode of the project's own modules, which the editable install leaves to the first import: where
	@# PYTHONDONTWRITEBYTECODE is set (as on the CI machine) every process start compiled them again, ~50 ms.
	$(BIN)/python -m compileall -q burrowpy broker >/dev/null

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

# Only the connector and what Spark itself lacks (the artifacts `--packages` would add).
$(SPARK_STAMP): spark-connector/pom.xml $(STAMP)
	rm -rf $(SPARK_JARS)
	mvn -q -B -f spark-connector/pom.xml dependency:copy-dependencies -DoutputDirectory=$(abspath $(SPARK_JARS)) \
		-DincludeArtifactIds=$(SPARK_CONNECTOR_JARS)
	touch $@

$(JAVA_STAMP): $(JAVA_PEERS)/pom.xml $(shell find $(JAVA_PEERS)/src -type f)
	mvn -q -B -f $(JAVA_PEERS)/pom.xml package
	touch $@

$(JMX_EXPORTER): Makefile
	mvn -q -B dependency:copy -Dartifact=io.prometheus.jmx:jmx_prometheus_javaagent:$(JMX_EXPORTER_VERSION) \
		-DoutputDirectory=$(abspath $(dir $@)) -Dmdep.stripVersion=true
	touch $@

# Kafka's documentation of its configs, which the broker's DescribeConfigs gives (include_documentation):
# generated from a Kafka node of the peers' jars rather than copied into the repository.
$(CONFIG_DOCS): $(JAVA_PEERS)/pom.xml scripts/kafka_config_docs.py | $(JAVA_STAMP) $(STAMP)
	$(BIN)/python scripts/kafka_config_docs.py

$(GO_STAMP): $(GO_PEERS)/go.mod $(GO_PEERS)/go.sum $(shell find $(GO_PEERS) -name '*.go' 2>/dev/null)
	cd $(GO_PEERS) && go build -o bin/ ./cmd/...
	touch $@

$(BURROW_STAMP):
	@mkdir -p $(BURROW_PEER)/bin
	@if GOBIN=$(abspath $(BURROW_PEER)/bin) go install github.com/linkedin/Burrow@latest 2>$(BURROW_PEER)/bin/go-install.err; then \
		echo "current Burrow installed from the Go module proxy"; touch $@; exit 0; \
	fi; \
	if [ -n "$(BURROW_GIT)" ] && \
	   [ "$$(cat $(BURROW_CACHE)/VERSION 2>/dev/null)" != "$$(git --git-dir=$(BURROW_GIT) describe --tags HEAD)" ]; then \
		echo "the Go module proxy does not serve github.com/linkedin/Burrow; building $$(git --git-dir=$(BURROW_GIT) describe --tags HEAD) from $(BURROW_GIT) into $(BURROW_CACHE)"; \
		rm -rf $(BURROW_CACHE) && mkdir -p $(BURROW_CACHE)/src && \
		git --git-dir=$(BURROW_GIT) archive HEAD | tar -x -C $(BURROW_CACHE)/src && \
		(cd $(BURROW_CACHE)/src && go build -o $(BURROW_CACHE)/Burrow .) && \
		git --git-dir=$(BURROW_GIT) describe --tags HEAD > $(BURROW_CACHE)/VERSION || exit 1; \
	fi; \
	if [ -f $(BURROW_CACHE)/VERSION ]; then \
		ln -sf $(BURROW_CACHE)/Burrow $(BURROW_PEER)/bin/Burrow && cp $(BURROW_CACHE)/VERSION $(BURROW_PEER)/bin/VERSION && touch $@; \
	else \
		echo "current Burrow not installed: the Go module proxy refuses github.com/linkedin/Burrow ($$(tail -1 $(BURROW_PEER)/bin/go-install.err)), no git snapshot was given (BURROW_GIT=...) and none was built before in $(BURROW_CACHE); its side-by-side tests will skip"; \
	fi

# Its own TLS, zlib and the built-in LZ4 are enough for these tests (no Kerberos, no OAUTHBEARER over HTTP).
$(LIBRDKAFKA_STAMP):
	@if [ ! -f $(LIBRDKAFKA_CACHE)/.installed ]; then \
		if [ -z "$(LIBRDKAFKA_GIT)" ]; then \
			echo "librdkafka's test programs not built: no git snapshot of confluentinc/librdkafka was given (LIBRDKAFKA_GIT=...) and none was built before in $(LIBRDKAFKA_CACHE); their tests will skip"; \
			exit 0; \
		fi; \
		if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
			missing=""; \
			for p in $(LIBRDKAFKA_BUILD_DEPS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
			if [ -n "$$missing" ]; then \
				echo "installing Debian packages:$$missing"; \
				apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
			fi; \
		fi; \
		echo "building librdkafka $(LIBRDKAFKA_TAG)'s test programs from $(LIBRDKAFKA_GIT) into $(LIBRDKAFKA_CACHE) (several minutes, once)"; \
		rm -rf $(LIBRDKAFKA_CACHE) && mkdir -p $(LIBRDKAFKA_CACHE) && \
		git --git-dir=$(LIBRDKAFKA_GIT) archive $(LIBRDKAFKA_TAG) | tar -x -C $(LIBRDKAFKA_CACHE) && \
		( cd $(LIBRDKAFKA_CACHE) && \
		  { ./configure --disable-lz4-ext --disable-curl --disable-gssapi >build.log 2>&1 && \
		    $(MAKE) -j$$(nproc) libs >>build.log 2>&1 && $(MAKE) -j$$(nproc) -C tests build >>build.log 2>&1 || \
		    { tail -30 build.log; exit 1; }; } ) && \
		touch $(LIBRDKAFKA_CACHE)/.installed || exit 1; \
	fi; \
	mkdir -p $(dir $(LIBRDKAFKA_PEER)) && ln -sfn $(LIBRDKAFKA_CACHE) $(LIBRDKAFKA_PEER)

# The dashboard's charting library is vendored into the package, so run time needs no Node; this refreshes
# it from npm at the pinned version.
UPLOT_VERSION := 1.6.32
UI_VENDOR := burrowpy/httpserver/ui/static/vendor
ui-vendor:
	rm -rf build/uplot && mkdir -p build/uplot
	cd build/uplot && npm pack --silent uplot@$(UPLOT_VERSION) && tar -xzf uplot-$(UPLOT_VERSION).tgz
	cp build/uplot/package/dist/uPlot.iife.min.js build/uplot/package/dist/uPlot.min.css $(UI_VENDOR)/
	cp build/uplot/package/LICENSE $(UI_VENDOR)/uPlot.LICENSE

run: $(STAMP) $(SPARK_STAMP)
	$(BIN)/burrowpy demo

test: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports --cache-dir build/import-linter
	$(BIN)/mypy
	$(BIN)/pytest -q -p no:cacheprovider --durations=15 -n 2 --dist loadfile -m "not alone"
	$(BIN)/pytest -q -p no:cacheprovider --durations=5 -m alone

unit: install
	$(BIN)/pytest -q tests/unit

integration: install
	$(BIN)/pytest -q tests/integration

lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports --cache-dir build/import-linter
	$(BIN)/mypy

clean:
	rm -rf $(VENV) tests/js/node_modules build *.egg-info $(JAVA_PEERS)/target $(GO_PEERS)/bin $(BURROW_PEER)/bin \
		$(LIBRDKAFKA_PEER)
