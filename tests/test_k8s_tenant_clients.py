"""Who can reach a tenant's pods through its NetworkPolicies (`scheduler.tenants[].clients`).

The policies are evaluated as a NetworkPolicy implementation would for ingress: a pod
selected by some Ingress policy admits a connection only when one of those policies has a
rule whose peers (namespaces by name, ipBlocks) and ports match. Every object is also
validated strictly.
"""

from __future__ import annotations

from functools import cache
from ipaddress import ip_address, ip_network
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.catalog import Catalog, load_catalog
from infra.errors import SpecError
from infra.k8s import KubeObject
from infra.k8s.tenants import tenants
from infra.spec import load_spec_text
from infra.topology import expand
from tests.k8s_validation import manifest_problems

ROOT = Path(__file__).resolve().parents[1]
NAME_LABEL = "kubernetes.io/metadata.name"


@cache
def _catalog() -> Catalog:
    return load_catalog()


def _data() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "k8s-tenants.yaml").read_text())
    return data


def _policies(data: dict[str, Any], tenant: str) -> list[KubeObject]:
    spec = load_spec_text(yaml.safe_dump(data)).spec
    objects = tenants(spec, expand(spec, _catalog()), _catalog())
    assert manifest_problems(objects) == []
    return [
        o for o in objects if o["kind"] == "NetworkPolicy" and o["metadata"]["namespace"] == tenant
    ]


def _peer_matches(peer: dict[str, Any], namespace: str | None, address: str) -> bool:
    if "ipBlock" in peer:
        return ip_address(address) in ip_network(peer["ipBlock"]["cidr"])
    selector = peer.get("namespaceSelector")
    return selector is not None and namespace == selector["matchLabels"][NAME_LABEL]


def _admits(policies: list[KubeObject], namespace: str | None, address: str, port: int) -> bool:
    """Whether a TCP connection from (namespace's pod | outside address) reaches a pod."""
    for policy in policies:
        if "Ingress" not in policy["spec"]["policyTypes"]:
            continue
        for rule in policy["spec"].get("ingress", []):
            ports = {p["port"] for p in rule.get("ports", [])}
            if ports and port not in ports:
                continue
            if any(_peer_matches(peer, namespace, address) for peer in rule["from"]):
                return True
    return False


def test_an_autoscaled_tenant_is_reachable_from_the_ingress_controller() -> None:
    policies = _policies(_data(), "serving")
    assert _admits(policies, "ingress-nginx", "10.244.3.7", 8000)
    assert not _admits(policies, "research", "10.244.5.9", 8000)  # still isolated otherwise
    assert not _admits(policies, None, "203.0.113.5", 8000)


def test_a_tenant_serving_no_clients_stays_closed() -> None:
    policies = _policies(_data(), "research")
    assert not _admits(policies, "ingress-nginx", "10.244.3.7", 8000)
    assert "allow-clients" not in {p["metadata"]["name"] for p in policies}


def test_clients_from_the_spec_namespaces_networks_and_ports() -> None:
    data = _data()
    serving = data["scheduler"]["tenants"][1]
    serving["clients"] = {
        "namespaces": ["envoy-gateway-system"],
        "cidrs": ["192.0.2.0/24", "2001:db8::/32"],
        "ports": [8000],
    }
    policies = _policies(data, "serving")
    assert _admits(policies, "envoy-gateway-system", "10.244.3.7", 8000)
    assert _admits(policies, None, "192.0.2.44", 8000)
    assert _admits(policies, None, "2001:db8::7", 8000)
    assert not _admits(policies, "envoy-gateway-system", "10.244.3.7", 22)  # only its port
    assert not _admits(policies, "ingress-nginx", "10.244.3.7", 8000)  # the default replaced


def test_no_clients_when_the_spec_says_none() -> None:
    data = _data()
    data["scheduler"]["tenants"][1]["clients"] = {"namespaces": []}
    names = {p["metadata"]["name"] for p in _policies(data, "serving")}
    assert names == {"default-deny", "allow-same-namespace", "allow-dns", "allow-monitoring"}


def test_a_client_network_with_host_bits_is_refused() -> None:
    data = _data()
    data["scheduler"]["tenants"][1]["clients"] = {"cidrs": ["192.0.2.1/24"]}
    with pytest.raises(SpecError) as refused:
        load_spec_text(yaml.safe_dump(data))
    assert refused.value.path == "scheduler.tenants[1].clients.cidrs[0]"
