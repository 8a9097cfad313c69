"""Rules about references: catalog ids, MIG layout names, and names that must be unique or distinct."""

from __future__ import annotations

from collections.abc import Iterator

from infra.budget.evaluate_power import unknown_power_overrides
from infra.errors import spelling_hint
from infra.lint.context import LintContext
from infra.lint.engine import Violation, rule
from infra.lint.finding import Severity
from infra.lint.rules._util import group_path, mig_uses
from infra.spec import NodeGroup
from infra.spec.base import RESERVED_GROUP_HINT, reserved_group


@rule("RP001", "unknown-node", Severity.ERROR, "Node group names a node the catalog lacks.")
def unknown_node(ctx: LintContext) -> Iterator[Violation]:
    """Every node group's `node` must be a catalog node id.

    Why: everything downstream (GPU model, NICs, power, MIG profiles, rack units) comes from the
    catalog entry; an unknown id means railplan cannot plan or check the group at all.
    Fix: use one of the ids `railplan catalog` lists (e.g. `dgx-h100`, `dgx-a100-640gb`,
    `aws-p4d.24xlarge`); the hint suggests the closest one. A group described by a generic
    `shape` (GPUs, CPUs, memory, no catalog facts) can be planned and simulated, not deployed.
    """
    for i, group in enumerate(ctx.loaded.spec.node_groups):
        if group.shape is not None and group.node not in ctx.catalog.nodes:
            yield Violation(
                group_path(i, "shape"),
                "a generic server `shape` is for `railplan plan` and `simulate` only: "
                "lint, render and the reports need a catalog node's facts",
                "replace `shape` with `node` (a catalog id) to deploy the group",
            )
        elif group.node not in ctx.catalog.nodes:
            yield Violation(
                group_path(i, "node"),
                f"unknown node {group.node!r}",
                spelling_hint(group.node, ctx.catalog.nodes),
            )


@rule("RP002", "unknown-switch", Severity.ERROR, "Fabric names a switch the catalog lacks.")
def unknown_switch(ctx: LintContext) -> Iterator[Violation]:
    """Every fabric's switch must be a catalog switch id of the right kind.

    Why: the switch's radix, rate, management and SHARP support decide the fabric's shape;
    an InfiniBand switch cannot serve the Ethernet management network, nor the reverse.
    Fix: use a catalog id (`qm8700`, `qm8790`, `qm9700`, `qm9790` for InfiniBand; `sn2201`,
    `sn4600c` for management Ethernet).
    """
    switches = ctx.catalog.switches
    for path, switch_id, kind in ctx.loaded.spec.fabrics.switch_references():
        switch = switches.get(switch_id)
        if switch is None:
            yield Violation(
                path, f"unknown switch {switch_id!r}", spelling_hint(switch_id, switches)
            )
        elif switch.kind != kind:
            fitting = [k for k, s in switches.items() if s.kind == kind]
            yield Violation(
                path,
                f"{switch_id} is an {switch.kind} switch; this fabric needs {kind}",
                "use one of: " + ", ".join(sorted(fitting)),
            )


@rule(
    "RP003",
    "unknown-mig-layout",
    Severity.ERROR,
    "Node group refers to a MIG layout that mig_layouts does not define.",
)
def unknown_mig_layout(ctx: LintContext) -> Iterator[Violation]:
    """A node group's `mig` and each `mig_schedule` change must name a defined layout.

    Each value is `disabled` or a key of `mig_layouts` (in a per-GPU list, each `layout`).

    Why: the layout becomes the mig-parted config applied to the node; a missing name would
    leave the MIG manager without a config and the GPUs in whatever state they were.
    Fix: define the layout under `mig_layouts`, or correct the name (see the hint).
    """
    layouts = ctx.loaded.spec.mig_layouts
    for use in mig_uses(ctx):
        for j, assignment in enumerate(use.assignments):
            name = assignment.layout
            if name != "disabled" and name not in layouts:
                yield Violation(
                    use.assignment_path(j, "layout"),
                    f"MIG layout {name!r} is not defined in mig_layouts",
                    spelling_hint(name, [*layouts, "disabled"]),
                )


@rule(
    "RP004", "duplicate-name", Severity.ERROR, "Two node groups share a name or a hostname pattern."
)
def duplicate_name(ctx: LintContext) -> Iterator[Violation]:
    """Node group names must be unique, and groups sharing a hostname pattern need disjoint indices.

    Why: group names become Ansible groups and scheduler partitions; two groups with one
    hostname pattern and overlapping `first_index` ranges would give two servers the same
    hostname. One pattern with disjoint ranges (`gpu{index:04d}` from 1 and from 1001) is
    fine.
    Fix: rename one group, give it its own `hostname` pattern, or move its `first_index`.
    """
    names: dict[str, int] = {}
    patterns: dict[str, list[int]] = {}
    groups = ctx.loaded.spec.node_groups
    for i, group in enumerate(groups):
        pattern = group.hostname_pattern
        clash = next((j for j in patterns.get(pattern, []) if _overlap(groups[j], group)), None)
        if group.name in names:  # a repeated name also repeats its default hostnames
            yield Violation(
                group_path(i, "name"),
                f"node group name {group.name!r} is "
                f"already used by node_groups[{names[group.name]}]",
            )
        elif clash is not None:
            yield Violation(
                group_path(i, "hostname"),
                f"hostname pattern {pattern!r} is already used by node_groups[{clash}] "
                "for overlapping indices",
                "give each group its own hostname prefix, or disjoint first_index ranges",
            )
        names.setdefault(group.name, i)
        patterns.setdefault(pattern, []).append(i)


def _overlap(a: NodeGroup, b: NodeGroup) -> bool:
    """Whether two groups' index ranges (``first_index`` .. + ``count``) share an index."""
    return a.first_index < b.first_index + b.count and b.first_index < a.first_index + a.count


@rule(
    "RP005",
    "group-name-clash",
    Severity.ERROR,
    "A node group's name is a planned hostname or an inventory group railplan reserves.",
    needs_plan=True,
)
def group_name_clash(ctx: LintContext) -> Iterator[Violation]:
    """A node group's name must be neither a planned server's hostname nor a reserved group.

    The other inventory groups railplan makes cannot meet a hostname: SU and rack groups
    (``su_...``, ``rack_...``) and the reserved role groups hold ``_``, which no hostname
    does, and ``all``/``ungrouped`` have no digit, which every hostname has (its index).

    Why: each node group is an Ansible group, and Ansible keeps hosts and groups in one
    namespace: with a group `g` (hostnames `g1`, `g2`) and a group `g1` (hostnames `x1`,
    `x2`), the play "roll out g1" targets the host `g1`, and `x1`, `x2` never get the
    driver, RDMA or MIG. Ansible only warns ("Found both group and host with same name").
    A group named like a role group (`gpu_servers`, `control_hosts`, `all`, ...) merges with
    it, and one named `su_...` or `rack_...` can take the name of another group's SU or rack
    group (`su_train_su01` beside `train`): the rolling batch `--limit su_train_su01` then runs
    on the wrong servers.
    Fix: rename the group, or give the other group a hostname pattern that does not make
    its name.
    """
    servers = ctx.plan.servers if ctx.plan is not None else []
    hosts = {s.name: s.group for s in servers}
    for i, group in enumerate(ctx.loaded.spec.node_groups):
        if reserved_group(group.name):
            yield Violation(
                group_path(i, "name"),
                f"node group name {group.name!r} is an inventory group railplan reserves",
                RESERVED_GROUP_HINT,
            )
        elif group.name in hosts:
            other = hosts[group.name]
            first = next((s.name for s in servers if s.group == group.name), "?")
            yield Violation(
                group_path(i, "name"),
                f"node group name {group.name!r} is also the hostname of a server of node "
                f"group {other!r}: Ansible has one namespace for hosts and groups, so plays "
                f"for {group.name!r} would run on that host and not on {first} and the "
                "group's other servers",
                f"rename node group {group.name!r}, or change the hostname pattern of "
                f"node group {other!r}",
            )


# The name railplan's fabric plan gives InfiniBand's default partition (P_Key 0x7fff, beside one
# per node group: `infra.topology.addressing.partition_keys`) and slurm.conf's template name:
# a PartitionName (or NodeName) line named DEFAULT sets defaults for every later line instead of
# defining one, and Slurm compares the name case-insensitively.
RESERVED_GROUP_NAME = "default"


@rule(
    "RP006",
    "node-group-named-default",
    Severity.ERROR,
    "A node group is named `default`, the fabric's default partition and Slurm's template.",
)
def node_group_named_default(ctx: LintContext) -> Iterator[Violation]:
    """No node group may be named `default`.

    Each node group gets an InfiniBand partition of its own, named after it, beside the
    fabric's `default` partition (P_Key 0x7fff, every port a member); and on Slurm each
    becomes a partition, ``PartitionName=<group>``, where Slurm reads
    ``PartitionName=DEFAULT`` (case-insensitively) as the template line every later
    partition inherits. Node names cannot meet the same trap (``NodeName=DEFAULT``): every
    hostname carries its index's digits.
    Why: the group's partition key replaces the default partition's in the plan, so the
    subnet manager's partitions file has no default partition (P_Key 0x7fff) for the other
    groups' ports; on Slurm, slurmctld starts without complaint but there is no partition
    `default`: the group's servers are in none, and the line's settings (`Default=YES` among
    them) become the defaults of every later partition.
    Fix: rename the group (e.g. `gpu`).
    """
    for i, group in enumerate(ctx.loaded.spec.node_groups):
        if group.name.lower() == RESERVED_GROUP_NAME:
            slurm = ctx.loaded.spec.scheduler.kind == "slurm"
            yield Violation(
                group_path(i, "name"),
                f"node group name {group.name!r} is the fabric's default partition (P_Key "
                "0x7fff), which the group's own key would replace"
                + (
                    f", and PartitionName={group.name} is Slurm's DEFAULT template line, "
                    "not a partition: its servers would be in none"
                    if slurm
                    else ""
                ),
                "rename the group (e.g. 'gpu')",
            )


@rule(
    "RP007",
    "unknown-device-power",
    Severity.ERROR,
    "site.device_power names a device the catalog lacks.",
)
def unknown_device_power(ctx: LintContext) -> Iterator[Violation]:
    """Every `site.device_power` key must be a catalog node or switch id.

    Why: the figures replace the catalog's for that id in the power and cost budgets; a
    misspelt id replaces nothing, and without a power budget nothing else would say so.
    Fix: use the id `railplan catalog` lists for the node or switch (the hint suggests one).
    """
    for error in unknown_power_overrides(ctx.loaded.spec, ctx.catalog):
        yield Violation(error.path or "site.device_power", error.message, error.hint or "")


@rule(
    "RP008",
    "setting-unused",
    Severity.WARNING,
    "A setting names hardware the spec does not have, so nothing reads it.",
    needs_plan=True,
)
def setting_unused(ctx: LintContext) -> Iterator[Violation]:
    """Settings for hardware the spec lacks are read by nothing.

    `aws.fsx` sizes the checkpoint file system of AWS instances; a `site.device_power`
    entry replaces the figures of one catalog device. On a spec without AWS node groups, or
    for a node or switch no group or fabric uses, the setting changes no output.
    Why: a setting that silently does nothing usually means the spec is not the one intended
    (a DGX spec given an FSx file system expects checkpoints to go there; they do not).
    Fix: remove the setting, or name the node or switch the spec uses.
    """
    spec, catalog = ctx.loaded.spec, ctx.catalog
    nodes = {g.node for g in spec.node_groups}
    if spec.aws.fsx is not None and not any(
        n in catalog.nodes and catalog.nodes[n].cloud == "aws" for n in nodes
    ):
        yield Violation(
            "aws.fsx",
            "aws.fsx is set but no node group is an AWS instance type: nothing reads it",
            "checkpoints of servers outside AWS go to fabrics.storage; remove aws.fsx",
        )
    if ctx.plan is None:
        return  # what the cluster uses is the plan's to say (RP000 reports why there is none)
    used = nodes | {switch.model for switch in ctx.plan.switches}
    for device in spec.site.device_power:
        if device not in used and (device in catalog.nodes or device in catalog.switches):
            yield Violation(
                f"site.device_power.{device}",
                f"site.device_power names {device!r}, which no node group or fabric uses",
                "remove the entry, or name the node or switch the spec uses",
            )
