SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
export DJANGO_SETTINGS_MODULE ?= controlplane.settings

.PHONY: install test test-fast lint bench demo clean chromium prometheus alertmanager nginx postgres redis kafka spark-jars schema-registry

# This machine's own keys for the demo and the benchmarks (the settings refuse the public development
# key when DEBUG is false): generated once into var/dev.env, read by every process make starts.
DEV_ENV := var/dev.env
WITH_DEV_ENV := set -a && . ./$(DEV_ENV) && set +a &&

$(DEV_ENV): | $(STAMP)
	mkdir -p var
	$(PY) -c "import secrets; from cryptography.fernet import Fernet; \
	  print(f'SECRET_KEY={secrets.token_urlsafe(50)}'); \
	  print(f'MIRRORPLANE_SECRETS_KEY={Fernet.generate_key().decode()}'); \
	  print(f'METRICS_BEARER_TOKEN={secrets.token_urlsafe(24)}')" > $@.tmp && mv $@.tmp $@

$(STAMP): pyproject.toml
	test -x $(PY) || python3.11 -m venv $(VENV) || python3 -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# Chromium for the browser tests comes from Debian's packages (no browser downloads here).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian chromium for the browser tests"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null; \
	  else sudo apt-get update -qq && sudo apt-get install -y -qq chromium chromium-driver >/dev/null; fi; }

# A real Prometheus server (and promtool) for the metrics tests, from Debian's packages like Chromium.
prometheus:
	@command -v prometheus >/dev/null 2>&1 || { \
	  echo "installing Debian prometheus for the metrics tests"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus >/dev/null; \
	  else sudo apt-get update -qq && sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null; fi; }

# nginx, the reverse proxy in front of gunicorn in the client-address tests (TRUSTED_PROXY_COUNT), from Debian.
nginx:
	@command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || { \
	  echo "installing Debian nginx-light for the reverse-proxy tests"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq --no-install-recommends nginx-light >/dev/null; \
	  else sudo apt-get update -qq && sudo apt-get install -y -qq --no-install-recommends nginx-light >/dev/null; fi; }

# Alertmanager's amtool checks deploy/alertmanager/alertmanager.yml (tests/deploy), also from Debian.
alertmanager:
	@command -v amtool >/dev/null 2>&1 || { \
	  echo "installing Debian prometheus-alertmanager (amtool) for the deploy tests"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus-alertmanager >/dev/null; \
	  else sudo apt-get update -qq && sudo apt-get install -y -qq --no-install-recommends prometheus-alertmanager >/dev/null; fi; }

# PostgreSQL and Redis from Debian's packages, started on loopback when they do not answer
# (scripts/services.sh; a DATABASE_URL / REDIS_URL on another host is left to its owner).
postgres:
	@bash scripts/services.sh postgres

redis:
	@bash scripts/services.sh redis

# Apache Kafka 4.x for the tests, the benchmarks and `make demo KAFKA=apache`: the jars named by
# deploy/kafka/pom.xml, from Maven Central into var/kafka/<version>/libs (Maven's cache makes a second
# fetch local). The tests start their clusters from them (replication/kafka/apache.py).
# Then one broker started and stopped writes the classes it loads to an archive its JVMs map at start
# (replication.kafka.apache.build_class_data_archive: a broker's start about a third less CPU).
kafka: install
	@$(PY) -c "from replication.kafka.apache import kafka_libs, kafka_version; kafka_libs(); print('Apache Kafka', kafka_version())"
	@$(PY) -c "from replication.kafka.apache import build_class_data_archive as b; print('class-data archive', b())"

# A Confluent-compatible schema registry for the schema tests (one per cluster): Apicurio Registry, the
# Quarkus application deploy/schema-registry/pom.xml names, from Maven Central unpacked into
# var/schema-registry/<version>/app (Maven's cache makes a second fetch local; harness/apicurio.py).
schema-registry: install
	@$(PY) -c "from harness.apicurio import apicurio_app, apicurio_version; apicurio_app(); print('Apicurio Registry', apicurio_version())"

# Spark's s3a connector for a metrics lake on object storage (METRICS_DIR=s3://...): the jars named by
# deploy/spark/pom.xml (hadoop-aws of pyspark's Hadoop and the AWS SDK modules it calls), from Maven Central
# into var/spark-jars/<hadoop version>, cached the same way. Prints the `spark.jars` line of
# spark-defaults.conf that gives them to a report job (docs/analytics.md).
spark-jars: install
	@$(PY) -m dashboards.spark.s3a

# The suite runs on PostgreSQL, as CI does, unless DATABASE_URL says otherwise.
test: export DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/postgres
test: export REDIS_URL ?= redis://127.0.0.1:6379/0

# Two pytest-xdist worker processes by default (see below) (PYTEST_WORKERS=0: one process), each a suite of
# its own (its test database, Redis databases, Kafka clusters and registries: tests/environment.py); a file's
# tests stay on one worker, so module fixtures start once, the files of a costly session fixture (Spark, the
# SASL_SSL clusters, the schema registries) share one worker, and the longest go first (tests/scheduling.py).
# Most of the suite waits on brokers, workers and browsers rather than computes: on the 2-core machine two
# workers left the CPU idle a third of the time (vmstat), three 14% of it, and the suite took 1033 s of
# pytest with two and 824 s with three, in the same hour.
# On the slower 2-core machine of 2026-12-01 three workers held the load at 6-9 and three of four fresh-clone
# runs failed a different timing-sensitive Kafka test each (a 3 s sample without a write, a broker not yet
# applying a delete or listing a created topic); two keep the machine less starved, at some minutes more:
# fresh-clone runs of 2026-12-02 took 1,333 s and 1,234 s of pytest with two (1,844 tests, both passed), and
# 1,766 s (1,854 tests) on a machine whose web answered a request in 1.6-1.8x the CPU time of the others',
# and 1,116 s (1,862 tests) on the next one (2026-12-02, 14:54 UTC).
# A third worker runs no unit that uses a Kafka broker (tests/scheduling.py, HEAVY_WORKERS): the light units
# first, then Spark's and the browsers'; the first two run the broker units first. Fresh clones of
# 2026-12-03, 1,877-1,883 tests: 1,320 s with two workers in the old order, 1,149 s and 1,116 s in the
# new one (broker units first); with three, 1,159 s (the third on light units
# only), 1,125 s, and 1,129 s with a failure (tests/workers/test_failures.py's target outage: the statuses
# not back to OK within 60 s, the position writer's metadata requests failing 25-56 s after the target
# resumed; not seen with two). Two stay the default until that is
# understood: `make test PYTEST_WORKERS=3` runs three.
PYTEST_WORKERS ?= 2
# pytest exits 5 when it collected no tests: that is a failure here, as any other non-zero code.
test: install chromium prometheus alertmanager nginx postgres redis kafka schema-registry spark-jars
	$(PY) -m pytest -p no:cacheprovider --durations=30 -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS); \
	  code=$$?; if [ $$code -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$code

test-fast: install redis kafka schema-registry spark-jars
	$(PY) -m pytest -m "not slow and not e2e" $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check replication tests bench harness
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy
	# The models and the migrations agree (a development DEBUG: the check starts Django, writes nothing).
	DEBUG=true $(PY) manage.py makemigrations --check --dry-run

bench: install redis kafka $(DEV_ENV)
	$(WITH_DEV_ENV) $(PY) -m bench

# The whole product on one machine: Apache Kafka dc1/dc2 from Maven Central, with transactions (the
# embedded broker when there is no Java, or with KAFKA=embedded), web, Celery worker and beat,
# active-active flows with traffic and consumer groups (Procfile.demo, run by workers.procfile; Ctrl-C
# stops them in reverse order: workers before Kafka).
JAVA_FOUND := $(shell command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1 && echo yes)
KAFKA ?= $(if $(JAVA_FOUND),apache,embedded)
demo: install redis $(if $(filter apache,$(KAFKA)),kafka) $(DEV_ENV)
	@case "$(KAFKA)" in embedded|apache) ;; *) echo "KAFKA=$(KAFKA): use KAFKA=apache (the default with Java) or KAFKA=embedded"; exit 2;; esac
	@if [ "$(KAFKA)" = embedded ] && [ -z "$(JAVA_FOUND)$(filter command line,$(origin KAFKA))" ]; then \
	  echo "no java and mvn on PATH: the demo runs on the embedded broker (no transactions, approximate offset answers); install Java 17 and Maven for Apache Kafka"; fi
	mkdir -p var/demo
	$(WITH_DEV_ENV) $(PY) manage.py migrate --no-input
	$(WITH_DEV_ENV) $(PY) manage.py create_admin demo --password demo-password >/dev/null
	@grep -q '^METRICS_BEARER_TOKEN=' $(DEV_ENV) || $(PY) -c "import secrets; \
	  print(f'METRICS_BEARER_TOKEN={secrets.token_urlsafe(24)}')" >> $(DEV_ENV)
	$(WITH_DEV_ENV) DEMO_KAFKA=$(KAFKA) $(PY) -m workers.procfile Procfile.demo; code=$$?; \
	  if [ $$code -eq 130 ] || [ $$code -eq 0 ]; then echo "demo stopped"; else exit $$code; fi

clean:
	rm -rf $(VENV) var .pytest_cache
