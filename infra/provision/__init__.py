"""Cloud resources for a planned cluster, as Pulumi components (the ``pulumi`` extra).

`infra.provision.aws` builds an AWS GPU cluster (`AwsGpuCluster`) from a spec, its plan and
the catalog. Construction is pure: the project's ``__main__.py`` reads Pulumi config and
exports the outputs.
"""

from infra.provision.aws import AwsClusterArgs, AwsGpuCluster, fsx_size

__all__ = ["AwsClusterArgs", "AwsGpuCluster", "fsx_size"]
