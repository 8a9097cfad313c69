r"""The cluster spec: models, the YAML loader that keeps positions, and JSON Schema export.

>>> loaded = load_spec_text("name: lab\nnode_groups: [{name: gpu, node: dgx-h100, count: 4}]\n")
>>> loaded.spec.gpu_servers
4
"""

from infra.spec.base import Precision
from infra.spec.loader import (
    LoadedSpec,
    SpecValidationError,
    load_spec,
    load_spec_text,
    validate_spec,
)
from infra.spec.mig import MigAssignment, MigChange, MigSchedule, MigValue, assignments_of
from infra.spec.models import GpuSharing, NodeGroup, NodeShape, Spec
from infra.spec.scheduling import (
    CheckpointStorage,
    Monitoring,
    Scheduler,
    Tenant,
    duration_seconds,
)
from infra.spec.yamlpos import SourceMap, join_path, load_yaml_text, read_yaml_file

__all__ = [
    "CheckpointStorage",
    "GpuSharing",
    "LoadedSpec",
    "MigAssignment",
    "MigChange",
    "MigSchedule",
    "MigValue",
    "Monitoring",
    "NodeGroup",
    "NodeShape",
    "Precision",
    "Scheduler",
    "SourceMap",
    "Spec",
    "SpecValidationError",
    "Tenant",
    "assignments_of",
    "duration_seconds",
    "join_path",
    "load_spec",
    "load_spec_text",
    "load_yaml_text",
    "read_yaml_file",
    "validate_spec",
]
