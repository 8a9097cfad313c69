"""The cluster twin: a rendered deployment run as a cluster of hosts on this one machine.

One host per planned server, each a debootstrapped root of the spec's target OS (Ubuntu
22.04 or 24.04, cached) booted by ``systemd-nspawn`` with its own systemd, in its own
network, UTS, mount and PID namespaces, with ``sshd``, on a bridge that carries the plan's
management addresses; one ``ipmi_sim`` per server on its planned BMC address, whose chassis
control powers that host on and off; the real ``ansible-playbook`` over SSH to the rendered
inventory's ``ansible_host``; the target OS's own packages (munge, slurmd, slurmctld, openmpi)
through a caching proxy of the distribution's archive.

Stand-ins only at the hardware boundary (GPUs, HCAs, the kernel and its modules, NVIDIA's
and NVIDIA Networking's driver packages): ``standins/hw.py`` answers as ``nvidia-smi``,
``dcgmi``, ``ibstat`` and the rest, from the host's hardware description and a fault file
that scenarios write (docs/twin.md lists every contract). They reach the hosts the way the
real software does, as packages in a signed apt repository (the site mirror a real cluster
uses), so the roles' package tasks run for real.

Modules: `roots` (cached OS roots), `network` (bridges and namespaces), `mirror` (stand-in
packages, the repository, the archive proxy), `power` (a host's power and boot, the chassis
program ``ipmi_sim`` calls), `bmc` (``ipmi_sim`` per server), `hosts` (per-host roots and
hardware), `twin` (`ClusterTwin`, which ties them together), `ansible_run` (override
inventory, vault, playbook runs and their JSON results).
"""
