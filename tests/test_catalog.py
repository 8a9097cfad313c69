"""The bundled catalog: loads, cross-references resolve, every number has a source."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from infra.catalog import Catalog, Precision

DESIGN_IDS = {
    "gpus": {"a100-sxm4-40gb", "a100-sxm4-80gb", "h100-sxm5-80gb", "h200-sxm5-141gb"},
    "nodes": {
        "dgx-a100-320gb",
        "dgx-a100-640gb",
        "hgx-a100-80gb",
        "dgx-h100",
        "dgx-h200",
        "aws-p4d.24xlarge",
        "aws-p4de.24xlarge",
        "aws-p5.48xlarge",
    },
    "switches": {"qm8700", "qm8790", "qm9700", "qm9790"},
}


def test_catalog_has_every_id_design_md_names(catalog: Catalog) -> None:
    for table, ids in DESIGN_IDS.items():
        assert ids <= set(getattr(catalog, table)), table


def _numeric_fields(record: BaseModel) -> list[str]:
    out = []
    for name in type(record).model_fields:
        value = getattr(record, name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            # 0 marks "not applicable" (a cloud instance has no rack units or storage NICs)
            if value != 0:
                out.append(name)
        elif isinstance(value, dict | BaseModel) and name != "sources":
            out.append(name)  # dense_tflops, mig: one source covers the table
    return out


@pytest.mark.parametrize("table", ["gpus", "nodes", "switches"])
def test_every_number_cites_a_source(catalog: Catalog, table: str) -> None:
    for key, record in getattr(catalog, table).items():
        unsourced = [f for f in _numeric_fields(record) if f not in record.sources]
        assert not unsourced, f"{table}.{key}: no source for {unsourced}"


def test_site_limits_cite_sources(catalog: Catalog) -> None:
    assert set(catalog.site) <= set(catalog.site_sources)


def test_uncertain_facts_say_so(catalog: Catalog) -> None:
    # The H200 MIG placements were never observed on hardware; the data must say it.
    h200 = catalog.gpus["h200-sxm5-141gb"]
    ref = catalog.references[h200.sources["mig_placements"]]
    assert ref.confidence == "inferred" and ref.note


def test_a100_has_no_fp8_and_hopper_has(catalog: Catalog) -> None:
    assert not catalog.gpus["a100-sxm4-40gb"].supports(Precision.FP8)
    assert not catalog.gpus["a100-sxm4-80gb"].supports(Precision.FP8)
    assert catalog.gpus["h100-sxm5-80gb"].supports(Precision.FP8)
    assert catalog.gpus["h200-sxm5-141gb"].supports(Precision.FP8)


@pytest.mark.parametrize("gpu_id", sorted(DESIGN_IDS["gpus"]))
def test_mig_geometry_is_consistent(catalog: Catalog, gpu_id: str) -> None:
    mig = catalog.gpus[gpu_id].mig
    assert mig is not None
    for p in mig.profiles:
        assert all(s >= 0 and s + p.memory_slices <= mig.memory_slots for s in p.placements)
        assert p.max_count <= len(p.placements) or p.name.endswith("+me")
        assert p.name.startswith(f"{p.compute_slices}g.")
        assert p.memory_gib <= catalog.gpus[gpu_id].memory_gb


def test_nodes_agree_with_their_gpus(catalog: Catalog) -> None:
    for key, node in catalog.nodes.items():
        gpu = catalog.gpus[node.gpu]
        assert node.gpus == 8, key
        # NVSwitch generation follows the GPU: 6 on A100 baseboards, 4 on Hopper ones
        assert node.nvswitches == {"ampere": 6, "hopper": 4}[gpu.architecture], key


def test_mig_device_filter_format(catalog: Catalog) -> None:
    assert catalog.gpus["a100-sxm4-40gb"].mig_device_filter == "0x20B010DE"
    assert catalog.gpus["h200-sxm5-141gb"].mig_device_filter == "0x233510DE"


def test_references_are_complete(catalog: Catalog) -> None:
    for ref_id, ref in catalog.references.items():
        assert ref.title and ref.url, ref_id
        if ref.confidence != "primary":
            assert ref.note or ref.confidence == "secondary", f"{ref_id}: inferred needs a note"


def test_fp64_is_plain_and_fp64_tensor_is_labelled(catalog: Catalog) -> None:
    # NVIDIA datasheets: A100 FP64 9.7, FP64 Tensor Core 19.5; H100/H200 SXM 34 and 67.
    expected = {"a100": (9.7, 19.5), "h100": (34, 67), "h200": (34, 67)}
    for gpu_id, gpu in catalog.gpus.items():
        plain, tensor = expected[gpu_id.split("-")[0]]
        assert (gpu.dense_tflops["fp64"], gpu.fp64_tensor_tflops) == (plain, tensor), gpu_id
        assert "fp64_tensor_tflops" in gpu.sources


def test_switch_power_says_what_it_is(catalog: Catalog) -> None:
    basis = {sid: sw.power_basis for sid, sw in catalog.switches.items()}
    assert basis["qm8700"] == basis["qm8790"] == "psu_rating"  # 1,100 W per PSU
    assert basis["sn2201"] == basis["sn4600c"] == "typical"
    assert basis["qm9700"] == basis["qm9790"] == "max"


def _cores(text: str) -> set[int]:
    out: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def test_gpu_core_affinity_is_sourced_and_within_the_host(catalog: Catalog) -> None:
    for key, node in catalog.nodes.items():
        assert "host" in node.sources, key
        if not node.gpu_cores:
            continue
        assert "gpu_cores" in node.sources, key
        assert len(node.gpu_cores) == node.gpus
        cores = [_cores(c) for c in node.gpu_cores]
        assert all(c <= set(range(node.host.cores)) for c in cores), key
        # every core set is one NUMA node's share: the same size on every GPU
        assert len({len(c) for c in cores}) == 1, key
        assert len(cores[0]) == node.host.cores // node.host.numa_nodes, key


def test_host_facts_of_the_named_systems(catalog: Catalog) -> None:
    # the brief's facts: DGX A100 2x64 cores SMT2, 1 TB (320GB) / 2 TB (640GB); DGX H100 2x56,
    # 2 TB; p4d 96 vCPUs 1152 GiB; p5 192 vCPUs 2048 GiB
    a320, a640 = catalog.nodes["dgx-a100-320gb"].host, catalog.nodes["dgx-a100-640gb"].host
    assert (a320.cpus, a320.memory_gib, a640.memory_gib) == (256, 1024, 2048)
    h100 = catalog.nodes["dgx-h100"].host
    assert (h100.cores, h100.cpus, h100.memory_gib) == (112, 224, 2048)
    assert catalog.nodes["aws-p4d.24xlarge"].host.cpus == 96
    assert catalog.nodes["aws-p4d.24xlarge"].host.memory_gib == 1152
    p5 = catalog.nodes["aws-p5.48xlarge"].host
    assert (p5.cpus, p5.memory_gib) == (192, 2048)
