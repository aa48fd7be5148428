# rekey: build, test, demo and bench. `make help` lists the targets.
GO      ?= go
BIN     := bin/rekey
PKGS    := ./...

YARN_JAR := bin/rekey-yarn.jar

.PHONY: help build yarn-jar test unit soak demo bench bench-e2e bench-sizes lint fuzz compat testenv-up testenv-down oracle clean

help:
	@echo "build         build bin/rekey"
	@echo "yarn-jar      build bin/rekey-yarn.jar, the YARN driver (Maven, Java 17)"
	@echo "test          unit and integration tests (starts the mini cluster if none is up)"
	@echo "unit          unit tests only (go test, no cluster)"
	@echo "soak          the protocol's schedule tests at length (SCHEDULES, default 20000; PHASE_SCHEDULES, default 1000)"
	@echo "demo          run the demo job on the bundled snapshot"
	@echo "bench         rekey vs the Java baseline, as ratios"
	@echo "bench-e2e     whole re-key jobs: rekey, Java and Spark on one snapshot (SIZE=small|default|large)"
	@echo "bench-sizes   bench-e2e at SIZES (default small default large), cost per 1M cells, the staged job beside its parts"
	@echo "lint          gofmt check and go vet"
	@echo "fuzz          every fuzz target briefly (FUZZTIME, default 10s), the damage targets longer (LONG_FUZZTIME, default 2m)"
	@echo "compat        the HBase-judged suites on HBase 2.6.1 and 3.0.0-alpha-4, and HBase 1.7.2's snapshots (docs/compat.md)"
	@echo "testenv-up    start the HBase mini cluster on 127.0.0.1 (HBASE_VERSION picks the version)"
	@echo "testenv-down  stop it"

# CGO off: one static binary that runs on any Linux, as the README promises.
build:
	CGO_ENABLED=0 $(GO) build -o $(BIN) ./cmd/rekey

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
soak:
	REKEY_SCHEDULES=$(SCHEDULES) REKEY_PHASE_SCHEDULES=$(PHASE_SCHEDULES) $(GO) test ./pipeline -run 'TestSchedules|TestPhaseSchedules' -count=1 -timeout 6h -v

test: lint
	scripts/test.sh

demo: build
	scripts/demo.sh

bench: build
	scripts/bench.sh

bench-e2e: build
	scripts/bench-e2e.sh

bench-sizes: build
	scripts/bench-sizes.sh

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
