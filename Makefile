# rekey: build, test, demo and bench. `make help` lists the targets.
GO      ?= go
BIN     := bin/rekey
PKGS    := ./...

YARN_JAR := bin/rekey-yarn.jar

.PHONY: help build release yarn-jar test test-flakes test-k8s unit soak demo bench bench-e2e bench-bigtable bench-catchup bench-sizes bench-synctable lint fuzz compat testenv-up testenv-down oracle clean

help:
	@echo "build         build bin/rekey"
	@echo "release       static linux/amd64 and arm64 binaries, stripped, with SHA256SUMS, in bin/release (and the image, with docker)"
	@echo "yarn-jar      build bin/rekey-yarn.jar, the YARN driver (Maven, Java 17)"
	@echo "test          unit and integration tests (starts the mini cluster if none is up)"
	@echo "test-k8s      the Kubernetes suite on a real control plane (opt-in; builds it once, about 9 minutes: testenv/README.md)"
	@echo "test-flakes   the flake hunt: the plain and destructive passes N times (N=3) on one cluster"
	@echo "unit          unit tests only (go test, no cluster)"
	@echo "soak          the protocol's schedule tests at length (SCHEDULES, default 20000; PHASE_SCHEDULES, default 1000; WHOLE_SCHEDULES, default 2000)"
	@echo "demo          run the demo job on the bundled snapshot"
	@echo "bench         rekey vs the Java baseline, as ratios"
	@echo "bench-e2e     whole re-key jobs: rekey, Java and Spark on one snapshot (SIZE=small|default|large)"
	@echo "bench-bigtable rekey vs Google's HBase-compatible Java client, into gcloud's Bigtable emulator (also part of bench)"
	@echo "bench-catchup a catch-up (--since) against a whole run of the same snapshot: 1% changed, then a major compaction (SIZE, default large)"
	@echo "bench-sizes   bench-e2e at SIZES (default small default large), cost per 1M cells, the staged job beside its parts"
	@echo "bench-synctable rekey verify --all vs HBase's HashTable + SyncTable --dryrun on MapReduce, planted differences (CUSTOMERS=20000)"
	@echo "lint          gofmt check and go vet"
	@echo "fuzz          every fuzz target briefly (FUZZTIME, default 10s), the damage targets longer (LONG_FUZZTIME, default 2m)"
	@echo "compat        the HBase-judged suites on HBase 2.6.1 and 3.0.0-alpha-4, and HBase 1.7.2's snapshots (docs/compat.md)"
	@echo "testenv-up    start the HBase mini cluster on 127.0.0.1 (HBASE_VERSION picks the version)"
	@echo "testenv-down  stop it"

# The version `rekey version` and every --json summary name: the tag, or
# the commit, with -dirty for uncommitted changes. -buildvcs=auto records
# the commit where there is a git checkout (this machine's GOFLAGS turns it
# off) and builds without it where there is none.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

# CGO off: one static binary that runs on any Linux, as the README promises.
build:
	CGO_ENABLED=0 $(GO) build -buildvcs=auto -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/rekey

# Release binaries: static, for linux/amd64 and linux/arm64, without debug
# information or build paths (-trimpath -s -w), with SHA256SUMS beside
# them in bin/release/; then the image, where a docker daemon answers.
RELEASE_DIR := bin/release
release:
	rm -rf $(RELEASE_DIR) && mkdir -p $(RELEASE_DIR)
	for arch in amd64 arm64; do \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -buildvcs=auto -trimpath \
			-ldflags '-s -w $(LDFLAGS)' -o $(RELEASE_DIR)/rekey-$(VERSION)-linux-$$arch ./cmd/rekey || exit 1; \
	done
	cd $(RELEASE_DIR) && sha256sum rekey-* > SHA256SUMS && ls -l rekey-* && cat SHA256SUMS
	@if docker info >/dev/null 2>&1; then \
		docker build -f deploy/kubernetes/Dockerfile --build-arg VERSION=$(VERSION) -t rekey:$(VERSION) . ; \
	else \
		echo "no docker daemon here: build the image with docker build -f deploy/kubernetes/Dockerfile --build-arg VERSION=$(VERSION) -t rekey:$(VERSION) ."; \
	fi

# The YARN driver (deploy/yarn): its own Maven module, Hadoop provided by
# the cluster. The jar is a build output, never committed.
yarn-jar: $(YARN_JAR)

$(YARN_JAR): deploy/yarn/pom.xml $(shell find deploy/yarn/src -name '*.java' 2>/dev/null)
	cd deploy/yarn && mvn -q -B -Dstyle.color=never package
	mkdir -p bin
	cp deploy/yarn/target/rekey-yarn.jar $@.tmp
	mv -f $@.tmp $@

unit:
	scripts/unit.sh

# The seeded schedules of pipeline/schedule_test.go and
# schedule_phases_test.go, many more than `make test` plays; a failing
# seed is printed with the command that replays it.
SCHEDULES       ?= 20000
PHASE_SCHEDULES ?= 1000
WHOLE_SCHEDULES ?= 2000
soak:
	REKEY_SCHEDULES=$(SCHEDULES) REKEY_PHASE_SCHEDULES=$(PHASE_SCHEDULES) REKEY_WHOLE_SCHEDULES=$(WHOLE_SCHEDULES) $(GO) test ./pipeline -run 'TestSchedules|TestPhaseSchedules|TestWholeSchedules' -count=1 -timeout 6h -v

test: lint
	scripts/test.sh

# The Kubernetes suite (deploy/kubernetes, internal/kubeletshim): opt-in,
# not part of `make test`, because building the control plane the first
# time takes about 9 minutes of two cores (testenv/k8s, cached in
# ~/.cache/rekey-k8s). Starts the HBase mini cluster if none is up and
# the control plane, runs the suite (REKEY_REQUIRE_K8S=1: a missing
# control plane fails it rather than skipping), then stops what it
# started (KEEP_K8S=1 leaves the control plane up).
test-k8s: lint
	@hb=0; testenv/bin/status >/dev/null 2>&1 || { testenv/bin/up && hb=1; } || exit 1; \
	testenv/k8s up || exit 1; \
	REKEY_REQUIRE_K8S=1 REKEY_REQUIRE_CLUSTER=1 $(GO) test -count=1 -timeout 45m -v \
		-run '^(TestK8s|TestExpand|TestRewritePaths|TestShim)' ./internal/kubeletshim/ ./deploy/kubernetes/; st=$$?; \
	[ "$(KEEP_K8S)" = 1 ] || testenv/k8s down; \
	[ $$hb = 0 ] || testenv/bin/down; \
	exit $$st

# The flake hunt: the plain and destructive passes of `make test` N times
# in a row on one cluster; prints every test that failed at least once.
N ?= 3
test-flakes: lint
	N=$(N) scripts/test-flakes.sh

demo: build
	scripts/demo.sh

bench: build
	scripts/bench.sh

bench-e2e: build
	scripts/bench-e2e.sh

bench-bigtable: build
	scripts/bench-bigtable.sh

bench-catchup: build
	scripts/bench-catchup.sh

bench-sizes: build
	scripts/bench-sizes.sh

# Runs TestVerifyAgreesWithSyncTable (REKEY_SYNCTABLE=1: two MapReduce
# jobs, too slow for make test) first, then the timed comparison.
bench-synctable: build
	scripts/bench-synctable.sh

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

fuzz:
	scripts/fuzz.sh

compat:
	scripts/compat.sh

oracle:
	testenv/bin/build

testenv-up:
	testenv/bin/up

testenv-down:
	testenv/bin/down

clean:
	rm -rf bin
