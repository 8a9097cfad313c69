"""Pulumi components that provision a planned cluster (the ``pulumi`` extra).

`infra.provision.kubernetes` declares railplan's Kubernetes cluster services (built as plain
data by `infra.k8s`); `infra.provision.aws` builds an AWS GPU cluster (`AwsGpuCluster`) from a
spec, its plan and the catalog. Construction is pure: the project's ``__main__.py`` reads
Pulumi config and exports the outputs. Nothing is imported here, so a target loads only its
own provider SDK (pulumi_aws alone takes seconds to import).
"""
