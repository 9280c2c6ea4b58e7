"""Every CRD in crds/ is a well-formed apiextensions.k8s.io/v1 definition the registry agrees with.

The apiserver itself checks them in the integration tests; this catches the plain mistakes
(a wrong file name, two storage versions, a printer column pointing nowhere) without one.
"""

from pathlib import Path
from typing import Any

import pytest
import yaml

from koordpy.api.kinds import KINDS, alternatives, by_id

CRDS = sorted((Path(__file__).resolve().parent.parent / "crds").glob("*.yaml"))


def load(path: Path) -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    assert len(docs) == 1, f"{path.name}: one CRD per file"
    crd = docs[0]
    assert isinstance(crd, dict)
    return crd


def schema_at(schema: dict[str, Any], json_path: str) -> dict[str, Any] | None:
    """The schema a simple printer-column path (``.a.b[*].c``, ``.a[0].b``) points at, or None."""
    node: dict[str, Any] | None = schema
    for part in json_path.strip(".").split("."):
        name, _, index = part.partition("[")
        if node is None:
            return None
        node = node.get("properties", {}).get(name)
        if node is not None and index:
            node = node.get("items")
    return node


def test_the_crds_directory_holds_every_new_kind() -> None:
    names = {p.name for p in CRDS}
    assert {"topology.volcano.sh_hypernodes.yaml", "scheduling.volcano.sh_podgroups.yaml",
            "kueue.x-k8s.io_topologies.yaml", "kai.scheduler_topologies.yaml",
            "scheduling.run.ai_podgroups.yaml", "scheduling.run.ai_queues.yaml"} <= names


@pytest.mark.parametrize("path", CRDS, ids=lambda p: p.name)
def test_crd_structure(path: Path) -> None:
    crd = load(path)
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    spec = crd["spec"]
    names = spec["names"]
    assert crd["metadata"]["name"] == f"{names['plural']}.{spec['group']}"
    assert path.name == f"{spec['group']}_{names['plural']}.yaml"
    assert spec["scope"] in ("Namespaced", "Cluster")
    assert names["kind"] and names["listKind"] == names["kind"] + "List"
    versions = spec["versions"]
    assert [v["storage"] for v in versions].count(True) == 1
    for version in versions:
        assert version["served"] is True
        assert version["subresources"] == {"status": {}}
        root = version["schema"]["openAPIV3Schema"]
        assert root["type"] == "object"
        assert {"apiVersion", "kind", "metadata", "spec", "status"} <= set(root["properties"])
        assert root["properties"]["spec"]["type"] == "object"
        columns = version["additionalPrinterColumns"]
        assert any(c["name"] == "Age" for c in columns)
        for column in columns:
            if column["jsonPath"].startswith(".metadata."):
                continue
            if "?(" in column["jsonPath"]:
                continue  # a filter expression (conditions by type) is the apiserver's to check
            target = schema_at(root, column["jsonPath"])
            assert target is not None, f"{path.name}: column {column['name']} points at no declared field"


@pytest.mark.parametrize("path", CRDS, ids=lambda p: p.name)
def test_every_crd_is_a_registered_kind_of_the_same_scope(path: Path) -> None:
    spec = load(path)["spec"]
    for version in spec["versions"]:
        matching = [k for k in KINDS if k.group == spec["group"] and k.version == version["name"]
                    and k.kind == spec["names"]["kind"]]
        assert len(matching) == 1, f"{path.name} {version['name']} is not in the registry"
        kind = matching[0]
        assert kind.plural == spec["names"]["plural"]
        assert kind.namespaced == (spec["scope"] == "Namespaced")


@pytest.mark.parametrize("path", CRDS, ids=lambda p: p.name)
def test_every_crd_serves_each_version_the_registry_reads_and_stores_the_preferred(path: Path) -> None:
    # koordpy lists a kind at the first version served, the preferred first (kinds.alternatives):
    # where its own copy is the CRD installed, that one is served and stored; the others are
    # served for manifests written at them, and as koordpy ships no conversion webhook, the
    # versions share one schema (conversion None).
    spec = load(path)["spec"]
    preferred = by_id(f"{spec['names']['plural']}.{spec['group']}")
    assert {v["name"] for v in spec["versions"]} == {k.version for k in alternatives(preferred)}
    assert [v["name"] for v in spec["versions"] if v["storage"]] == [preferred.version]
    assert spec.get("conversion", {"strategy": "None"})["strategy"] == "None"
    assert len({yaml.safe_dump(v["schema"]) for v in spec["versions"]}) == 1


def test_hypernode_crd_carries_the_webhook_rules() -> None:
    root = load(CRDS[[p.name for p in CRDS].index("topology.volcano.sh_hypernodes.yaml")])
    spec = root["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["members"]["minItems"] == 1
    assert spec["properties"]["tier"]["minimum"] == 0
    member = spec["properties"]["members"]["items"]
    assert member["properties"]["type"]["enum"] == ["Node", "HyperNode"]
    assert len(member["properties"]["selector"]["x-kubernetes-validations"]) == 2
    assert root["spec"]["names"]["shortNames"] == ["hn"]
    assert [c["name"] for c in root["spec"]["versions"][0]["additionalPrinterColumns"]] == [
        "Tier", "TierName", "NodeCount", "Age"]
