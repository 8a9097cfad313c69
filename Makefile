# railplan: `make demo` and `make test` work on a fresh clone; each creates .venv itself.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: demo test test-slow lint typecheck unit tools fuzz bench accuracy golden sandbox twin slurm-replay cluster-twin k8s-twin-build k8s-twin k8s-twin-sched clean

$(STAMP): pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -c requirements.lock -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	@echo "== railplan lint -v examples/*.yaml (claims-h100-8k warns: its scaling, checkpoint and utilisation claims are not met)"
	@$(BIN)/railplan lint --verbose examples/*.yaml || true
	@echo
	@echo "== railplan mig check examples/mig-parted/config-default.yaml (NVIDIA's published default)"
	@$(BIN)/railplan mig check examples/mig-parted/config-default.yaml
	@echo
	@echo "== railplan plan examples/dgx-h100-superpod.yaml"
	@$(BIN)/railplan plan examples/dgx-h100-superpod.yaml
	@echo
	@echo "== railplan predict examples/dgx-a100-superpod.yaml --collective all_reduce --gpus 1120 --step-factor 8"
	@$(BIN)/railplan predict examples/dgx-a100-superpod.yaml --collective all_reduce --gpus 1120 --step-factor 8
	@echo
	@echo "== railplan budget examples/claims-h100-8k.yaml (MISS: one vendor claim is not met)"
	@$(BIN)/railplan budget examples/claims-h100-8k.yaml || true
	@echo
	@echo "== railplan train examples/claims-h100-8k.yaml --gpus 8000 --model gpt3-175b --global-batch 2000"
	@$(BIN)/railplan train examples/claims-h100-8k.yaml --gpus 8000 --model gpt3-175b --global-batch 2000
	@echo
	@echo "== a broken spec: railplan lint tests/corpus/lint/mig-4g-4g.yaml (exit code 1 expected)"
	@$(BIN)/railplan lint tests/corpus/lint/mig-4g-4g.yaml || true

# ruff first (seconds; a format slip fails at once), then mypy beside the tests: its 20 s on
# one core overlap the workers' start-up and the tail, where a core is idle.
test: lint
	@$(MAKE) --no-print-directory -j2 typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check infra tools tests bench __main__.py setup.py
	$(BIN)/ruff format --check infra tools tests bench __main__.py setup.py

typecheck: $(STAMP)
	$(BIN)/mypy
	$(BIN)/mypy __main__.py

# Tests run on WORKERS processes (pytest-xdist): one more than the cores, since many tests
# wait on a daemon or a subprocess, and at most 8 (each worker imports the whole package).
# Tests marked `slow` (long real-tool runs and refits, each kind with a faster case left
# here) are `make test-slow`'s, which .ci/run runs.
# `--dist worksteal`: a worker that runs out of tests takes half of another's queue, so a few
# long real-tool tests met late do not leave one worker running alone at the end.
WORKERS ?= $(shell n=$$(nproc); echo $$(( n < 8 ? n + 1 : 8 )))
# Bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE=1, as on
# the 2-core machine): otherwise every worker and every `railplan` or stand-in process the
# tests start compiles the modules it imports again, and pytest rewrites each test module's
# asserts again on every run. __pycache__ is ignored by git.
unit test-slow: export PYTHONDONTWRITEBYTECODE :=
unit: $(STAMP) tools
	$(BIN)/pytest -n $(WORKERS) --dist worksteal -m 'not slow'

test-slow: $(STAMP) tools
	$(BIN)/pytest -n $(WORKERS) --dist worksteal -m slow

# The real consumers of rendered files: Chromium for the report (tests/test_report_browser.py),
# slurmctld with munged (tests/test_slurmctld.py), opensm on an ibsim fabric
# (tests/test_opensm_real.py), promtool on the alert rules and shellcheck on every shell script
# (tests/test_monitoring_real.py); the cluster twin's hosts and BMCs (tests/test_cluster_twin.py:
# systemd-nspawn, debootstrap, ipmi_sim and ipmitool, apt-cacher-ng, apt-ftparchive).
# Installed as root with apt-get (CI); elsewhere those tests skip, saying why, and under
# CI=true a missing tool fails them.
TOOLS_PKGS := chromium:chromium slurmctld:slurmctld slurmd:slurmd scontrol:slurm-client munged:munge opensm:opensm ibsim:ibsim-utils smpquery:infiniband-diags promtool:prometheus shellcheck:shellcheck \
	systemd-nspawn:systemd-container debootstrap:debootstrap ipmi_sim:openipmi ipmitool:ipmitool \
	apt-cacher-ng:apt-cacher-ng apt-ftparchive:apt-utils gpg:gnupg
tools:
	@missing=""; for pair in $(TOOLS_PKGS); do \
	  command -v $${pair%%:*} >/dev/null 2>&1 || [ -x /usr/sbin/$${pair%%:*} ] || missing="$$missing $${pair#*:}"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "== installing Debian's$$missing for the real-tool tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else \
	    echo "missing Debian packages$$missing and cannot install them here (needs root and"; \
	    echo "apt-get): the tests that run them will skip"; \
	  fi; \
	fi

# The property tests with fresh random examples, FUZZ_RUNS times (`make test` replays fixed ones).
# The whole-CLI fuzz (tests/test_cli_fuzz.py) runs CLI_FUZZ_EXAMPLES batches of 10 cases a run.
FUZZ_RUNS ?= 10
CLI_FUZZ_EXAMPLES ?= 40
fuzz: $(STAMP)
	for run in $$(seq $(FUZZ_RUNS)); do \
	  HYPOTHESIS_PROFILE=fuzz CLI_FUZZ_EXAMPLES=$(CLI_FUZZ_EXAMPLES) \
	    $(BIN)/pytest -q $$(grep -lE '\bgiven\(' tests/*.py) || exit 1; \
	done

bench: $(STAMP)
	$(BIN)/python bench/run.py

# Regenerate the error-band table infra/budget/data/bands.json (held-out rows of both data
# files), then docs/accuracy.md: collectives from tests/data/nccl-measurements.yaml, the
# "## Training" section from tests/data/training-measurements.yaml, and the "## Error bands"
# section from the table (tests check every part). The generators are tools/accuracy, run
# from the checkout (`python -m` puts it on the path); the wheel does not carry them.
MEASUREMENTS := tests/data/nccl-measurements.yaml tests/data/training-measurements.yaml \
  tests/data/checkpoint-measurements.yaml
accuracy: $(STAMP)
	$(BIN)/python -m tools.accuracy.band_table json $(MEASUREMENTS) > infra/budget/data/bands.json
	{ $(BIN)/python -m tools.accuracy.calibration tests/data/nccl-measurements.yaml; echo; \
	  $(BIN)/python -m tools.accuracy.accuracy_doc tests/data/training-measurements.yaml; echo; \
	  $(BIN)/python -m tools.accuracy.band_table markdown $(MEASUREMENTS); } > docs/accuracy.md

# railplan's Slurm model against real Slurm: slurmctld and one slurmd per node in network
# namespaces replay two compressed traces (tests/slurm_replay; about 40 minutes, root only).
slurm-replay: $(STAMP) tools
	$(BIN)/python -m tests.slurm_replay --out slurm-replay.json

# Regenerate the golden rendered trees under tests/golden/expected/ (review the diff, then commit).
golden: $(STAMP)
	$(BIN)/python tests/golden/regenerate.py

# The fabric twin of the largest DGX A100 plan (1,600 servers): ibsim, two real opensm sweeps,
# ibnetdiscover, ibtracert, railplan verify (tests/test_fabric_twin.py; minutes, so .ci/run
# runs it after `make test`, which runs the lab and one-SU fabric twins).
twin: $(STAMP) tools
	RAILPLAN_TWIN_LARGE=1 $(BIN)/pytest -q -p no:cacheprovider tests/test_fabric_twin.py -k largest

# Run the rendered playbook's configuration tasks for real, twice, against a Debian chroot
# built with debootstrap (needs root and Debian's mirror; .ci/run runs it, `make test` does not).
sandbox: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python tests/sandbox/run.py

# The cluster twin's full scenarios (tests/test_cluster_twin.py, docs/twin.md): the rendered
# deployment of a 4-node lab and one DGX A100 SU run as clusters of Ubuntu 22.04 and 24.04
# hosts (root; builds the OS roots once into /var/tmp/railplan-twin/cache). `make test` runs
# its smoke case only.
# The cluster twin's scenarios (docs/twin.md); TWIN_SPECS picks the twins (the 4-node lab on
# 22.04: 45-51 minutes on 2 cores, cold; .ci/run runs it when CI's time allows). Root only;
# one twin at a time.
TWIN_SPECS ?= lab-jammy,lab-noble,su-jammy,su-noble
cluster-twin: $(STAMP) tools
	PATH="$(CURDIR)/$(BIN):$$PATH" RAILPLAN_CLUSTER_TWIN=full RAILPLAN_TWIN_SPECS="$(TWIN_SPECS)" \
	  $(BIN)/pytest -q -p no:cacheprovider -rA tests/test_cluster_twin.py -k 'not smoke'

# The Kubernetes twin (tests/k8s_twin, docs/kubernetes.md): etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kubectl built with Go from their modules at the
# pinned release into /var/cache/railplan-k8s-twin (RAILPLAN_K8S_TWIN_CACHE; a cold build
# downloads about 1.5 GB of modules and compiles for many minutes on 2 cores, a warm one
# finds the binaries; the Kueue and kwok controllers and Volcano are built beside them); then the
# controllers' CRDs and the rendered manifests of the default specs applied server-side, each
# on an empty cluster, and the scheduling scenarios (below). Go is this target's build tool only.
# Modules run in this order; under CI's deadline (.ci/run) the last ones skip when time is short.
k8s-twin-build: $(STAMP)
	$(BIN)/python -m tests.k8s_twin build

k8s-twin: k8s-twin-build
	RAILPLAN_K8S_TWIN=1 $(BIN)/pytest -q -p no:cacheprovider -rA tests/test_k8s_twin.py tests/test_k8s_twin_volcano.py \
	  tests/test_k8s_twin_sched.py tests/test_k8s_twin_tenants.py tests/test_k8s_twin_monitoring.py \
	  tests/test_k8s_twin_simulate.py

# The twin's scheduling scenarios: the Kueue controller (with its webhooks) and kwok (the
# planned nodes' simulated kubelet), built from their modules by k8s-twin-build too, run
# against the control plane with the Kueue variant of examples/k8s-tenants.yaml applied.
k8s-twin-sched: k8s-twin-build
	RAILPLAN_K8S_TWIN=1 $(BIN)/pytest -q -p no:cacheprovider -rA tests/test_k8s_twin_sched.py tests/test_k8s_twin_tenants.py tests/test_k8s_twin_simulate.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
