"""The user documentation cannot silently fall behind the code: every relative link in README.md
and docs/*.md reaches an existing file (and heading, when it names one), and docs/reference.md
names every flag of ``koordpy run``, every configuration key and every metric."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from koordpy.cli.main import build_parser
from koordpy.controller.metrics import Metrics
from koordpy.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", *DOCS]
REFERENCE = ROOT / "docs" / "reference.md"
# [text](target) not preceded by "!" is a link; images are checked the same way. Code spans and
# fenced blocks are removed first: a link shown as code is not a link.
_LINK = re.compile(r"\[[^\]]*\]\(([^()\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def _prose(text: str) -> str:
    return _CODE.sub("", _FENCE.sub("", text))


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_slug(h) for h in _HEADING.findall(_FENCE.sub("", path.read_text()))}


def _links(path: Path) -> list[str]:
    return [t for t in _LINK.findall(_prose(path.read_text())) if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


def test_the_docs_exist() -> None:
    names = {p.name for p in DOCS}
    for page in ("README.md", "getting-started.md", "concepts.md", "reference.md", "migration.md",
                 "troubleshooting.md", "design.md", "benchmarks.md"):
        assert page in names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in _links(page):
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert broken == []


def test_the_link_checker_sees_links() -> None:
    # Guards the checker itself: a regex that matched nothing would pass every page.
    assert len(_links(ROOT / "docs" / "README.md")) >= 7
    assert _slug("Why is my job stuck? `koordpy explain`") == "why-is-my-job-stuck-koordpy-explain"
    assert _slug("Kueue / KAI: Topology") == "kueue--kai-topology"


def _run_flags() -> list[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    run = sub.choices["run"]
    return sorted(flag for action in run._actions for flag in action.option_strings
                  if flag.startswith("--") and flag != "--help")


def test_reference_names_every_run_flag() -> None:
    flags = _run_flags()
    assert "--config" in flags and "--no-leader-elect" in flags  # the parser was really read
    text = REFERENCE.read_text()
    assert [f for f in flags if f"`{f}" not in text] == []


def _keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    out = []
    for name, field in model.model_fields.items():
        key = prefix + (field.alias or name)
        out.append(key)
        nested = field.annotation
        if isinstance(nested, type) and issubclass(nested, BaseModel):
            out += _keys(nested, key + ".")
    return out


def test_reference_names_every_configuration_key() -> None:
    keys = _keys(Settings)
    assert {"schedulerNames", "leaderElection", "leaderElection.leaseDurationSeconds"} <= set(keys)
    text = REFERENCE.read_text()
    assert [k for k in keys if f"`{k}`" not in text] == []


def test_reference_names_every_metric() -> None:
    names = set()
    for metric in Metrics().registry.collect():
        if metric.name.startswith(("scheduler_", "koordpy_")):
            names.add(f"{metric.name}_total" if metric.type == "counter" else metric.name)
    assert "scheduler_schedule_attempts_total" in names and "koordpy_leader" in names
    text = REFERENCE.read_text()
    assert sorted(n for n in names if f"`{n}`" not in text) == []


# kube-scheduler v1.37's plugins that act on a pending pod's spec (its default profile, plus those the
# control plane's feature gates add): each must be named in the reference's honoured-or-refused list.
KUBE_SCHEDULER_FILTERS = ("SchedulingGates", "PrioritySort", "NodeName", "NodeUnschedulable", "TaintToleration",
                          "NodeAffinity", "NodePorts", "NodeResourcesFit", "VolumeRestrictions", "NodeVolumeLimits",
                          "VolumeBinding", "VolumeZone", "PodTopologySpread", "InterPodAffinity", "DefaultPreemption",
                          "DynamicResources", "NodeDeclaredFeatures", "GangScheduling")
STATUSES = {"honoured", "refused"}


def _field_rows() -> list[list[str]]:
    text = REFERENCE.read_text()
    section = text.split("### Pod-spec fields kube-scheduler filters on", 1)[1].split("\n#", 1)[0]
    rows = [[cell.strip() for cell in line.strip().strip("|").split(" | ")]
            for line in section.splitlines() if line.startswith("| ")]
    assert rows[0] == ["field", "status", "kube-scheduler plugin", "what koordpy does"]
    return [r for r in rows[1:] if set(r[0]) != {"-"}]  # the header's rule is no row


def test_the_field_list_names_every_filter_plugin_and_a_status_for_each_field() -> None:
    rows = _field_rows()
    assert len(rows) >= 15 and all(len(r) == 4 for r in rows), rows
    assert {r[1] for r in rows} <= STATUSES, {r[1] for r in rows} - STATUSES
    plugins = " ".join(r[2] for r in rows)
    assert [p for p in KUBE_SCHEDULER_FILTERS if p not in plugins] == []


def test_the_field_list_refuses_what_koordpy_refuses_in_its_own_words() -> None:
    from koordpy.core.filters import AFFINITY, FEATURES
    from koordpy.core.refusals import REFUSED_FIELDS

    rows = _field_rows()
    refused = [r for r in rows if r[1] == "refused"]
    for field, words in REFUSED_FIELDS.items():
        assert [r for r in refused if f"`{field}`" in r[0] and words in r[3]], field
    # A refused row is one of those, or a pod that does not parse (reported as invalid).
    assert all(any(f"`{f}`" in r[0] for f in REFUSED_FIELDS) or "invalid" in r[3] for r in refused), refused
    said = " ".join(r[3] for r in rows)
    assert AFFINITY in said and FEATURES in said


# -- kubectl commands name every PodGroup kind in full (issue 29, item 15) ------------------------

# Where commands are documented: the pages, the examples, the e2e scripts and their READMEs, the
# chart's NOTES and the CLI's own help texts.
COMMAND_DOCS = sorted({*PAGES, *(ROOT / "examples").rglob("*.md"), *(ROOT / "examples").rglob("*.yaml"),
                       *(ROOT / "e2e").rglob("*.md"), *(ROOT / "e2e").rglob("*.sh"),
                       *(ROOT / "charts").rglob("NOTES.txt"), *(ROOT / "koordpy" / "cli").glob("*.py")})
# kubectl VERB ...: one command, up to a pipe, a `;` or the line's end (lines continued by `\` joined).
_KUBECTL = re.compile(r"\bkubectl\s+(?:get|describe|delete|edit|patch|label|annotate|wait|explain)\s+([^|;`\n]*)",
                      re.I)


def bare_podgroups(text: str) -> list[str]:
    """The kubectl commands in ``text`` that name a PodGroup kind by a bare ``podgroups``: on a v1.37
    cluster that serves Kubernetes' own ``scheduling.k8s.io`` PodGroup, kubectl resolves it to that
    one, and every other PodGroup kind (Koordinator's, Volcano's, KAI's) is left out."""
    found = []
    for m in _KUBECTL.finditer(re.sub(r"\\\s*\n\s*", " ", text)):
        names = (part.split("/")[0].lower() for word in m.group(1).split() for part in word.split(","))
        if any(name in ("podgroup", "podgroups") for name in names):
            found.append(" ".join(m.group(0).split()))
    return found


def test_the_podgroup_checker_sees_bare_names_and_passes_full_ones() -> None:
    assert bare_podgroups("kubectl get nodes,pods,podgroups,cnt -A -o yaml | koordpy simulate -f -")
    assert bare_podgroups("$KUBECTL get -A podgroup train -o yaml")
    assert bare_podgroups("  kubectl describe podgroups/train")
    assert bare_podgroups("kubectl get -A -o yaml \\\n    nodes,podgroups,cnt \\\n    | koordpy simulate -f -")
    assert not bare_podgroups("kubectl get nodes,podgroups.scheduling.sigs.k8s.io,pg -A -o yaml")
    assert not bare_podgroups("kubectl get pods -l pod-group.scheduling.sigs.k8s.io=train")


@pytest.mark.parametrize("path", COMMAND_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_documented_kubectl_commands_name_podgroups_in_full(path: Path) -> None:
    assert bare_podgroups(path.read_text()) == []


# -- one truth about the rules between pods and volumes (issue 29, item 13) ------------------------

# What the field list says koordpy honours, by the words a page would use for it.
HONOURED_RULES = {"`spec.affinity.podAffinity`": ("pod affinity", "anti-affinity"),
                  "`spec.topologySpreadConstraints`": ("topology spread", "spread constraint"),
                  "`spec.containers[].ports[].hostPort`": ("host port",),
                  "`spec.volumes[].persistentVolumeClaim`": ("volume topology", "volume zone")}


def test_the_migration_guide_does_not_call_what_the_reference_honours_unsupported() -> None:
    rows = {r[0].split(" ", 1)[0].rstrip(","): r[1] for r in _field_rows()}
    assert {field: rows.get(field) for field in HONOURED_RULES} == dict.fromkeys(HONOURED_RULES, "honoured")
    text = (ROOT / "docs" / "migration.md").read_text()
    unsupported = [p for p in re.split(r"\n\s*\n", text) if p.lstrip().startswith("**Not supported**")]
    assert len(unsupported) >= 3  # one per scheduler: the split found them
    said = [(words, p.split(":", 1)[0]) for p in unsupported for words in
            (w for ws in HONOURED_RULES.values() for w in ws) if words in " ".join(p.lower().split())]
    assert said == []


# -- one figure for the first build of the control plane (issue 29, item 18) ----------------------

BUILD_DOCS = [*PAGES, ROOT / "examples" / "README.md", *(ROOT / "e2e").rglob("*.md"),
              ROOT / "e2e" / "controlplane" / "build.sh"]
_MINUTES = re.compile(r"(?:about|~|takes?)\s*(\d+)\s*min(?:utes?)?\b", re.I)


def build_times(text: str) -> list[int]:
    """The minutes a paragraph about building gives (``about 15 minutes``, ``~15 min``)."""
    out = []
    for paragraph in re.split(r"\n\s*\n", text):
        if re.search(r"\bbuil[dt]", paragraph, re.I):
            out += [int(m) for m in _MINUTES.findall(" ".join(paragraph.split()))]
    return out


def test_the_build_time_checker_reads_the_forms_the_docs_use() -> None:
    assert build_times("up.sh   # the first time it builds the binaries: about 15 minutes on 2 cores") == [15]
    assert build_times("builds the binaries the first time (~15 min)") == [15]
    assert build_times("the round would have taken ~80 minutes") == []


def test_the_docs_agree_on_the_first_builds_time() -> None:
    found = {str(p.relative_to(ROOT)): build_times(p.read_text()) for p in BUILD_DOCS}
    found = {k: v for k, v in found.items() if v}
    assert {"README.md", "examples/README.md", "e2e/controlplane/build.sh"} <= set(found), found
    assert {m for v in found.values() for m in v} == {15}, found
