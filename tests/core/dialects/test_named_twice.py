"""Issue 29, item 14: a pod two dialects name is in the first one's gang, and when that one's object
is missing its pods wait for it, whatever object the other names. A Job's pods with ``WorkloadWithJob``
carry ``spec.schedulingGroup`` (the PodGroup the Job controller made) beside the
``pod-group.scheduling.sigs.k8s.io`` label the user wrote: a label naming a PodGroup that does not
exist (a typo, the Job applied first, the PodGroup deleted) must not let them bind one by one."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.core.decisions import EventReason
from tests.builders import node, pod, podgroup, run


def upstream_group(name: str, min_count: int | None) -> dict[str, Any]:
    policy: dict[str, Any] = {"gang": {"minCount": min_count}} if min_count is not None else {"basic": {}}
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"schedulingPolicy": policy}}


def job_pod(name: str, label: str) -> dict[str, Any]:
    """A Job's pod as the Job controller makes it with WorkloadWithJob on, and the user's label."""
    p = pod(name, cpu="1", group=label)
    p["spec"]["schedulingGroup"] = {"podGroupName": "trainer-pg"}
    return p


NOT_FOUND = "PodGroup default/trian not found"


@pytest.mark.parametrize("min_count", [3, None], ids=["gang", "basic"])
def test_job_pods_whose_label_names_a_missing_podgroup_wait_for_it(min_count: int | None) -> None:
    pods = [job_pod(f"t-{i}", "trian") for i in range(3)]
    out = run(node("n0"), upstream_group("trainer-pg", min_count), *pods)
    assert out.bound == {}
    assert set(out.pending) == {"default/t-0", "default/t-1", "default/t-2"}
    assert all(m.startswith(NOT_FOUND) for m in out.pending.values())
    # Where the user looks: each pod gets the Event, as bare pods with the same label do.
    told = {e.obj for e in out.events if e.reason is EventReason.FAILED_SCHEDULING and e.message.startswith(NOT_FOUND)}
    assert told == set(out.pending)


def test_they_wait_as_bare_pods_with_the_same_label_do() -> None:
    bare = run(node("n0"), *(pod(f"t-{i}", cpu="1", group="trian") for i in range(3)))
    job = run(node("n0"), upstream_group("trainer-pg", 3), *(job_pod(f"t-{i}", "trian") for i in range(3)))
    assert job.pending == bare.pending


def test_once_the_named_podgroup_exists_they_are_its_gang() -> None:
    # The label's PodGroup, created: the pods are its gang (minMember 4 of 3 pods: they wait for it).
    pods = [job_pod(f"t-{i}", "trian") for i in range(3)]
    out = run(node("n0"), upstream_group("trainer-pg", 3), podgroup("trian", 4), *pods)
    assert out.bound == {}
    assert not any(m.startswith(NOT_FOUND) for m in out.pending.values())
    out = run(node("n0"), upstream_group("trainer-pg", 3), podgroup("trian", 3), *pods)
    assert len(out.bound) == 3
