#!/bin/sh
# Writes k8s-rdma-shared-dev-plugin's config.json selecting only the compute-fabric HCAs.
# The plugin selects devices by netdev name (ifNames), not by RDMA device name, and a
# netdev's name follows its PCI address, which railplan does not plan; the plan knows the
# compute rails as RDMA devices (mlx5_N, as NCCL_IB_HCA names them). So each node resolves
# them here, in an init container, from sysfs: /sys/class/infiniband/<hca>/device/net/<netdev>.
# Storage and in-band management ports are never named, so the plugin never offers them.
# Environment: COMPUTE_HCAS (space-separated), RESOURCE, HCA_MAX, VENDOR, OUT (config file),
# SYSFS (default /sys). A compute HCA without a netdev fails the pod: a node missing a rail
# must not offer RDMA to jobs that expect all of them.
set -eu
sysfs="${SYSFS:-/sys}"
names=""
for hca in $COMPUTE_HCAS; do
  found=""
  for dev in "$sysfs/class/infiniband/$hca/device/net/"*; do
    [ -e "$dev" ] || continue
    found=1
    names="$names${names:+, }\"${dev##*/}\""
  done
  if [ -z "$found" ]; then
    echo "railplan rdma-config: compute HCA $hca has no network device on this node" >&2
    exit 1
  fi
done
printf '{"configList": [{"rdmaHcaMax": %s, "resourceName": "%s", "selectors": {"ifNames": [%s], "vendors": ["%s"]}}], "periodicUpdateInterval": 300}\n' \
  "$HCA_MAX" "$RESOURCE" "$names" "$VENDOR" >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "railplan rdma-config: $RESOURCE on $names"
