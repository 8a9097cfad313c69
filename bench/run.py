"""Benchmarks: wall time and peak memory of linting, planning and rendering growing specs.

Not a test: numbers are printed, never asserted. Each case runs in a fresh Python process
so its peak RSS (``ru_maxrss``) is its own; wall time covers the work only (spec parse and
catalog load excluded). Planning cost should grow linearly with the GPU count.

    make bench            # all cases
    python bench/run.py --case plan:8192:1   # one case (servers, planes)
    python bench/run.py --case render:2048   # render one tree (servers)
    python bench/run.py --case report:1250   # `railplan report` of 1,250 DGX A100 (10,000 GPUs)
    python bench/run.py --case train:gpt3-175b:1250   # `railplan train`'s layout search
    python bench/run.py --case verify:1250   # `railplan verify` of 1,250 DGX A100 (one fault)
    python bench/run.py --case twin:1600     # the fabric twin of 1,600 DGX A100 (no fault)
    python bench/run.py --case verify-structure:1250   # `railplan verify --structure`, no spec
    python bench/run.py --case verify-stray:855184   # a 100 MB dump of stray cables (JSON)
    python bench/run.py --case simulate:100000   # `railplan simulate`, 10,000 GPUs, 100k jobs
    python bench/run.py --case simulate:100000:static   # the same, MIG none|static|daynight

A render case splits its CPU time into planning, building the files and writing them
(``plan_cpu_s``, ``build_cpu_s``, ``write_cpu_s``; ``other_cpu_s`` is the rest: reading the
spec, lint's rules, imports) and gives the load average beside it. ``write_system_cpu_s`` is
the part of the write the kernel spent, almost all of it creating the files: it follows the
file system's recent deletions more than railplan (ext4 without a journal passes over every
inode freed in the last minutes when it allocates one, and the case removes the previous
tree just before it renders). The render cases also
time `ansible-inventory --list` on the rendered inventory: the case's
``cpu_vs_ansible_inventory`` is the render's CPU time over that command's (the consumer's own
cost of reading what was rendered), and the full run compares the rendered inventory against
a bare inventory of the same hostnames (JSON syntax, no variables): that ratio is what the
rendered groups and variables cost Ansible.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PLAN_CASES = [(128, 1), (2048, 1), (8192, 1), (16384, 8)]  # DGX H100 servers, planes
LINT_GROUPS = [10, 100, 400]
RENDER_SERVERS = [2048, 4096, 16384]  # 4,096 and 16,384: the render grows linearly
PULUMI_SERVERS = [1250]  # 10,000 GPUs on Kubernetes, under Pulumi's mock runtime
REPORT_SERVERS = [140, 1250]  # DGX A100: the SuperPOD example's size and 10,000 GPUs
TWIN_SERVERS = [20, 1600]  # DGX A100: one SU; the largest plan (80 SUs, 40 pods)
TRAIN_CASES = [("gpt3-175b", 1250), ("llama3-405b", 2048), ("gpt-1t", 4096)]  # DGX H100 servers
BENCH_ROOT = Path(tempfile.gettempdir()) / "railplan-bench"


def plan_spec(servers: int, planes: int) -> str:
    """A DGX H100 cluster with compute (SHARP), storage and management networks."""
    return f"""name: bench
site: {{rack: {{power_kw: 44}}, management_cidr: 10.0.0.0/8, bmc_cidr: 11.0.0.0/8}}
node_groups: [{{name: gpu, node: dgx-h100, count: {servers}, hostname: "n{{index:06d}}"}}]
fabrics:
  compute: {{switch: qm9700, su_size: 32, sharp: true, subnet_manager: opensm, planes: {planes}}}
  storage: {{switch: qm9700}}
  management: {{}}
"""


def lint_spec(groups: int) -> str:
    """``groups`` node groups of 32 DGX H100 each, half of them MIG-split."""
    lines = [
        "name: bench",
        "site: {management_cidr: 10.0.0.0/8, bmc_cidr: 11.0.0.0/8, address_block_bits: 9}",
        "scheduler: {mig_strategy: mixed}",
        "mig_layouts:",
        '  balanced: {profiles: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}',
        "fabrics: {compute: {switch: qm9700, subnet_manager: opensm, planes: 8}}",
        "node_groups:",
    ]
    for i in range(groups):
        mig = "balanced" if i % 2 else "disabled"
        lines.append(
            f"  - {{name: g{i}, node: dgx-h100, count: 32, "
            f"hostname: 'g{i}-{{index:03d}}', mig: {mig}}}"
        )
    return "\n".join(lines) + "\n"


def pulumi_spec(servers: int) -> str:
    """A Kubernetes DGX H100 cluster with Volcano, two tenants and a MIG day/night group."""
    infer = max(8, servers // 16)
    return f"""name: bench
site: {{rack: {{power_kw: 44}}, management_cidr: 10.0.0.0/8, bmc_cidr: 11.0.0.0/8}}
node_groups:
  - {{name: train, node: dgx-h100, count: {servers - infer}, hostname: "t{{index:05d}}"}}
  - name: infer
    node: dgx-h100
    count: {infer}
    hostname: "i{{index:05d}}"
    mig: day
    mig_schedule:
      changes: [{{at: "0 7 * * *", mig: day}}, {{at: "0 21 * * *", mig: disabled}}]
fabrics:
  compute: {{switch: qm9700, su_size: 32, sharp: true, subnet_manager: ufm}}
scheduler:
  mig_strategy: mixed
  batch: volcano
  tenants: [{{name: research, gpus: {servers * 6}, priority: high}},
            {{name: serving, gpus: {infer * 8}, priority: critical}}]
mig_layouts: {{day: {{profiles: {{"1g.10gb": 7}}}}}}
"""


def report_spec(servers: int) -> str:
    """DGX A100 on HDR (QM8790, SUs of 20, SHARP) with storage, management and budgets."""
    gpus = servers * 8
    return f"""name: bench
site: {{rack: {{power_kw: 28, units: 42}}, management_cidr: 10.0.0.0/8, bmc_cidr: 11.0.0.0/8}}
node_groups: [{{name: dgx, node: dgx-a100-640gb, count: {servers}, hostname: "dgx{{index:04d}}"}}]
fabrics:
  compute: {{switch: qm8790, su_size: 20, sharp: true, subnet_manager: ufm}}
  storage: {{switch: qm8790, oversubscription: 1.33, filesystem_gbps: 400}}
  management: {{}}
budgets:
  - all_reduce: {{bytes: 1GiB, gpus: {gpus}, max_ms: 15}}
  - scaling_efficiency: {{gpus: {gpus}, min: 0.85, model: gpt3-175b}}
  - checkpoint: {{bytes: 2.8TB, max_s: 120}}
  - rack_power: {{max_kw: 28}}
"""


def report_case(servers: int) -> dict[str, float]:
    """`railplan report` in-process, as the CLI runs it (spec read, lint, plan, budgets, page)."""
    spec_file = BENCH_ROOT / f"report-{servers}.yaml"
    output = BENCH_ROOT / f"report-{servers}.html"
    BENCH_ROOT.mkdir(parents=True, exist_ok=True)
    spec_file.write_text(report_spec(servers), encoding="utf-8")
    seconds, cpu_s, code = _cli_seconds("report", str(spec_file), "--output", str(output))
    html = output.read_text(encoding="utf-8")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "seconds": round(seconds, 3),
        "peak_mib": round(peak, 1),
        "cpu_s": round(cpu_s, 2),
        "exit": code,
        "mib": round(len(html.encode()) / 2**20, 2),
        "svgs": html.count("<svg "),
    }


def _cli_seconds(*argv: str) -> tuple[float, float, int]:
    """Wall and CPU time and exit code of ``railplan ARGV`` run in this process.

    CPU time (user + system) is the steadier figure on a shared machine.

    The commands' own entry point, so what is timed is what a user waits for (lint, plan,
    budgets and output, each as often as the command does them); progress bars are off.
    """
    import contextlib
    import io

    from infra.cli import main as cli_main

    os.environ["RAILPLAN_PROGRESS"] = "never"
    start, cpu = time.perf_counter(), time.process_time()
    try:  # the command's stdout would spoil this case's JSON line
        with contextlib.redirect_stdout(io.StringIO()):
            cli_main(list(argv))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    return time.perf_counter() - start, time.process_time() - cpu, code


def format_case(findings: int) -> dict[str, float | str]:
    """``findings`` findings as text on one 300,000-character line, as a hostile trial fed it."""
    from infra.lint.finding import Finding, Severity
    from infra.lint.formats import format_text

    line = "x" * 300_000
    found = [Finding("a.yaml", 1, c, "RP001", Severity.ERROR, "m") for c in range(1, findings + 1)]
    start = time.perf_counter()
    out = format_text(found, {"a.yaml": [line]}, 1)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "seconds": round(seconds, 3),
        "peak_mib": round(peak, 1),
        "mib": round(len(out) / 2**20, 1),
    }


def train_case(model: str, servers: int) -> dict[str, float | str]:
    """`railplan train`'s layout search for a preset on every GPU of ``servers`` DGX H100."""
    from infra.budget.train_plan import fitting_batch, train
    from infra.budget.train_request import TrainRequest, model_shape
    from infra.catalog import load_catalog
    from infra.spec import load_spec_text

    catalog = load_catalog()
    spec = load_spec_text(plan_spec(servers, 1)).spec
    shape = model_shape(model, None, None, None, None, None)
    batch = shape.global_batch or 2048
    request = TrainRequest(servers * 8, shape, batch)
    start = time.perf_counter()
    # the preset's batch, or the nearest a layout divides (as an unstated budget batch is)
    request = replace(request, global_batch=fitting_batch(spec, catalog, request))
    answer = train(spec, catalog, request)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    lay = answer.result.layout
    return {
        "seconds": round(seconds, 3),
        "peak_mib": round(peak, 1),
        "layouts": answer.candidates,
        "layout": f"tp{lay.tp} cp{lay.cp} pp{lay.pp} v{lay.virtual} dp{lay.dp}",
        "scaling": round(answer.scaling_efficiency, 3),
    }


def pulumi_case(servers: int) -> dict[str, float]:
    """Run __main__.py under Pulumi's mock runtime (no engine here) for ``servers``."""
    import runpy
    import tempfile as tmp

    import pulumi

    class Counting(pulumi.runtime.Mocks):
        count = 0

        def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
            Counting.count += 1
            return f"{args.name}_id", dict(args.inputs)

        def call(self, args: pulumi.runtime.MockCallArgs) -> dict:
            return {}

    spec_file = Path(tmp.mkdtemp()) / "bench.yaml"
    spec_file.write_text(pulumi_spec(servers))
    start = time.perf_counter()
    pulumi.runtime.set_mocks(Counting(), project="railplan", stack="bench", preview=False)
    pulumi.runtime.set_all_config({"railplan:spec": str(spec_file)})
    pulumi.runtime.test(lambda: runpy.run_path(str(ROOT / "__main__.py")))()
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": round(seconds, 3), "peak_mib": round(peak, 1), "resources": Counting.count}


def _verify_dump(servers: int) -> tuple[Any, str]:
    """The plan of `servers` DGX A100 and its cabling as `ibnetdiscover -p` prints it, one
    server HCA cable left out (tests/verify_dump.py, the fixture writer the verify tests use)."""
    from infra.catalog import load_catalog
    from infra.spec import load_spec_text
    from infra.topology import expand

    sys.path.insert(0, str(ROOT))
    from tests.verify_dump import as_built

    plan = expand(load_spec_text(report_spec(servers)).spec, load_catalog())
    lines = as_built(plan)
    lines.pop(next(iter(lines)))
    return plan, "\n".join(lines.values())


def _timed_verify(text: str, check: Callable[[Any], int]) -> dict[str, float | str]:
    """Parse the dump, run ``check`` on the fabric (it returns its finding count), time both."""
    from infra.verify import parse_text

    start = time.perf_counter()
    fabric = parse_text(text, "bench.txt")
    parsed = time.perf_counter()
    findings = check(fabric)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "seconds": round(seconds, 3),
        "peak_mib": round(peak, 1),
        "parse_s": round(parsed - start, 2),
        "links": len(fabric.links),
        "findings": findings,
    }


def verify_case(servers: int) -> dict[str, float | str]:
    """`railplan verify` after planning: parse an `ibnetdiscover -p` dump, resolve, compare
    (one finding: the missing cable)."""
    from infra.verify.compare import compare
    from infra.verify.resolve import resolve

    plan, text = _verify_dump(servers)
    return _timed_verify(text, lambda fabric: len(compare(plan, resolve(fabric))))


def twin_case(servers: int) -> dict[str, float | str]:
    """The fabric twin, no fault: ibsim on the rendered netlist, one opensm sweep with the
    rendered conf, ``ibnetdiscover -p``, `railplan verify` (tests/fabric_twin.py). 1,600 DGX
    A100 (80 SUs) is the largest DGX A100 plan: 40 pods of 40-port switches."""
    from infra.catalog import load_catalog

    sys.path.insert(0, str(ROOT))
    from tests.fabric_twin import FabricTwin, with_opensm

    workdir = BENCH_ROOT / f"twin-{servers}"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    start = time.perf_counter()
    with FabricTwin(with_opensm(report_spec(servers)), load_catalog(), workdir) as twin:
        up = time.perf_counter()
        _, log = twin.opensm()
        swept = time.perf_counter()
        dump = twin.dump("ibnetdiscover-p.txt", "ibnetdiscover", "-p")
        found = time.perf_counter()
        code, doc = twin.verify(dump)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # opensm or ibsim
    return {
        "seconds": round(seconds, 3),
        "peak_mib": round(peak, 1),
        "start_s": round(up - start, 1),
        "opensm_s": round(swept - up, 1),
        "ibnetdiscover_s": round(found - swept, 1),
        "verify_s": round(time.perf_counter() - found, 1),
        "links": doc["summary"]["links_seen"],
        "findings": len(doc["findings"]),
        "subnet_up": "yes" if "SUBNET UP" in log and code == 0 else "no",
    }


def verify_structure_case(servers: int) -> dict[str, float | str]:
    """`railplan verify --structure`: the same dump, the structure checks only (one finding:
    the server HCA without its cable is a grid_gap)."""
    from infra.verify.structure import check_structure

    _, text = _verify_dump(servers)
    return _timed_verify(text, lambda fabric: len(check_structure(fabric).findings))


def verify_stray_case(extra: int) -> dict[str, float | str]:
    """`railplan verify --format json` end to end on the 4-node lab's dump plus ``extra``
    cables to switches the plan does not have (855,184 make the 100 MB dump of a hostile
    trial): the findings past `LISTED` are counted, not made; output size in MiB."""
    import contextlib
    import io

    from infra.cli import main as cli_main

    sys.path.insert(0, str(ROOT))
    from infra.catalog import load_catalog
    from infra.spec import load_spec
    from infra.topology import expand
    from tests.verify_dump import as_built, unknown_cables

    spec = str(ROOT / "examples/a100-lab-mig.yaml")
    plan = expand(load_spec(spec).spec, load_catalog())
    dump = BENCH_ROOT / f"verify-stray-{extra}.txt"
    dump.parent.mkdir(parents=True, exist_ok=True)
    dump.write_text("\n".join([*as_built(plan).values(), *unknown_cables(extra)]) + "\n")
    del plan
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        cli_main(["verify", spec, str(dump), "--format", "json"])
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "seconds": round(seconds, 3),
        "peak_mib": round(peak, 1),
        "dump_mib": round(dump.stat().st_size / 2**20, 1),
        "peak_before_mib": round(before, 1),
        "json_mib": round(len(out.getvalue()) / 2**20, 2),
    }


def run_case(case: str) -> dict[str, float | str]:
    """Run one case in this process; return seconds and peak RSS in MiB."""
    from infra.catalog import load_catalog
    from infra.lint import lint_loaded
    from infra.spec import load_spec_text
    from infra.topology import expand

    kind, *args = case.split(":")
    catalog = load_catalog()
    by_size: dict[str, Callable[[int], dict[str, Any]]] = {
        "render": render_case,
        "pulumi": pulumi_case,
        "report": report_case,
        "verify": verify_case,
        "twin": twin_case,
        "verify-structure": verify_structure_case,
        "verify-stray": verify_stray_case,
        "format": format_case,
    }
    if kind in by_size:
        return by_size[kind](int(args[0]))
    if kind == "train":
        return train_case(args[0], int(args[1]))
    if kind == "simulate":
        from simulate_case import simulate_case

        return simulate_case(int(args[0]), *args[1:])
    if kind == "plan":
        spec = load_spec_text(plan_spec(int(args[0]), int(args[1]))).spec
        start = time.perf_counter()
        plan = expand(spec, catalog)
        seconds = time.perf_counter() - start
        extra = {"cables": len(plan.cables), "switches": len(plan.switches)}
    else:
        loaded = load_spec_text(lint_spec(int(args[0])))
        start = time.perf_counter()
        findings = lint_loaded(loaded, catalog)
        seconds = time.perf_counter() - start
        extra = {"findings": len(findings)}
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": round(seconds, 3), "peak_mib": round(peak, 1), **extra}


def render_case(servers: int) -> dict[str, float]:
    """`railplan render` of ``servers`` DGX H100 into BENCH_ROOT/render-N, in-process as the
    CLI runs it (spec read, lint, plan, render, write)."""
    spec_file = BENCH_ROOT / f"render-{servers}.yaml"
    root = BENCH_ROOT / f"render-{servers}"
    BENCH_ROOT.mkdir(parents=True, exist_ok=True)
    # SHARP off: the plan cases' spec enables it under the distributions' OpenSM, which lint
    # refuses (RP082), and render renders nothing for a spec with lint errors.
    text = plan_spec(servers, 1 if servers <= 8192 else 8).replace("sharp: true", "sharp: false")
    spec_file.write_text(text, encoding="utf-8")
    shutil.rmtree(root, ignore_errors=True)  # every run writes the whole tree
    with _phase_cpu() as phases:
        seconds, cpu_s, code = _cli_seconds(
            "render", str(spec_file), "--root", str(root), "--force"
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    files = sum(1 for p in root.rglob("*") if p.is_file())
    # the consumer's own cost: Ansible reading the rendered inventory, CPU beside CPU
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    inventory_s = inventory_seconds(root / "inventories" / "bench", root / "ansible.cfg")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    inventory_cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {
        "seconds": round(seconds, 3),
        "peak_mib": round(peak, 1),
        "cpu_s": round(cpu_s, 2),
        # the render's CPU by phase; "other" is reading the spec, lint's rules and imports
        **{f"{phase}_cpu_s": round(s, 2) for phase, s in phases.items() if phase != "system"},
        "other_cpu_s": round(cpu_s - phases["plan"] - phases["build"] - phases["write"], 2),
        "write_system_cpu_s": round(phases["system"], 2),  # the kernel's: see the docstring
        "load_1m": round(os.getloadavg()[0], 1),  # the machine is shared: CPU time varies
        "exit": code,
        "files": files,
        "ansible_inventory_s": round(inventory_s, 2),
        "ansible_inventory_cpu_s": round(inventory_cpu, 2),
        "cpu_vs_ansible_inventory": round(cpu_s / inventory_cpu, 2),
    }


@contextlib.contextmanager
def _phase_cpu() -> Iterator[dict[str, float]]:
    """CPU time of a render's plan, build and write, each as the render command runs it.

    Wraps the functions the command reaches them through (lint's context plans; the command
    imports `render_tree` and `write_tree` when it runs), and puts them back after.
    ``system``: the system (kernel) part of the write's.
    """
    import infra.lint.context
    import infra.render.tree
    import infra.render.writer

    spent = {"plan": 0.0, "build": 0.0, "write": 0.0, "system": 0.0}
    targets = [
        ("plan", infra.lint.context, "expand"),
        ("build", infra.render.tree, "render_tree"),
        ("write", infra.render.writer, "write_tree"),
    ]

    def timed(phase: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            start, system = time.process_time(), os.times().system
            try:
                return function(*args, **kwargs)
            finally:
                spent[phase] += time.process_time() - start
                if phase == "write":
                    spent["system"] += os.times().system - system

        return run

    originals = [(module, name, getattr(module, name)) for _, module, name in targets]
    try:
        for phase, module, name in targets:
            setattr(module, name, timed(phase, getattr(module, name)))
        yield spent
    finally:
        for module, name, function in originals:
            setattr(module, name, function)


def inventory_seconds(source: Path, config: Path | None) -> float:
    """Wall time of `ansible-inventory --list` on ``source``."""
    env = {**os.environ, "ANSIBLE_CONFIG": str(config)} if config else dict(os.environ)
    tool = Path(sys.executable).parent / "ansible-inventory"
    start = time.perf_counter()
    subprocess.run(
        [str(tool), "-i", str(source), "--list"], capture_output=True, check=True, env=env
    )
    return time.perf_counter() - start


def inventory_comparison(servers: int) -> str:
    """Time the rendered inventory against bare ones with the same hostnames.

    Two bare inventories: JSON syntax (what the rendered hosts.yml uses, the fast path of
    ansible-core's loader) and block YAML (what a hand-written inventory looks like).
    """
    tree = BENCH_ROOT / f"render-{servers}"
    inventory = tree / "inventories" / "bench"
    hosts = json.loads((inventory / "hosts.yml").read_text())["all"]["children"]["gpu"]["hosts"]
    bare_json = BENCH_ROOT / f"bare-{servers}.json.yml"
    bare_json.write_text(json.dumps({"all": {"hosts": dict.fromkeys(hosts)}}))
    bare_yaml = BENCH_ROOT / f"bare-{servers}.yml"
    bare_yaml.write_text("all:\n  hosts:\n" + "".join(f"    {h}:\n" for h in hosts))
    rendered_s = inventory_seconds(inventory, tree / "ansible.cfg")
    json_s = inventory_seconds(bare_json, None)
    yaml_s = inventory_seconds(bare_yaml, None)
    return (
        f"ansible-inventory --list: rendered {rendered_s:.1f} s; bare JSON {json_s:.1f} s "
        f"(ratio {rendered_s / json_s:.2f}); bare YAML {yaml_s:.1f} s "
        f"(ratio {rendered_s / yaml_s:.2f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case")
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case)))
        return
    cases = [
        (f"plan {s * 8:,} GPUs" + (f" in {p} planes" if p > 1 else ""), f"plan:{s}:{p}")
        for s, p in PLAN_CASES
    ]
    cases += [(f"lint {g} groups ({g * 256:,} GPUs)", f"lint:{g}") for g in LINT_GROUPS]
    cases += [(f"render {s:,} servers", f"render:{s}") for s in RENDER_SERVERS]
    cases += [(f"pulumi (mocks) {s * 8:,} GPUs", f"pulumi:{s}") for s in PULUMI_SERVERS]
    cases += [(f"report {s * 8:,} GPUs", f"report:{s}") for s in REPORT_SERVERS]
    cases += [(f"train {m} on {s * 8:,} GPUs", f"train:{m}:{s}") for m, s in TRAIN_CASES]
    cases += [("lint text, 16,384 findings on 1 line", "format:16384")]
    cases += [("verify 10,000 GPUs (one fault)", "verify:1250")]
    if shutil.which("ibsim") and shutil.which("opensm"):
        cases += [(f"twin {s * 8:,} GPUs (no fault)", f"twin:{s}") for s in TWIN_SERVERS]
    cases += [("verify --structure 10,000 GPUs (one fault)", "verify-structure:1250")]
    cases += [("verify 100 MB dump, 855,184 stray cables", "verify-stray:855184")]
    cases += [("simulate 100,000 jobs on 10,000 GPUs", "simulate:100000")]
    print(f"{'case':<36} {'wall s':>8} {'peak MiB':>9}  detail")
    for label, case in cases:
        out = subprocess.run(
            [sys.executable, __file__, "--case", case],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        result = json.loads(out.stdout)
        detail = ", ".join(
            f"{k} {v:,}" if isinstance(v, int | float) else f"{k} {v}"
            for k, v in result.items()
            if k not in ("seconds", "peak_mib")
        )
        print(f"{label:<36} {result['seconds']:>8.2f} {result['peak_mib']:>9.1f}  {detail}")
        if case.startswith("render:"):
            print(f"{'':<36} {inventory_comparison(int(case.split(':')[1]))}")


if __name__ == "__main__":
    main()
