"""Issue 29, items 7, 16 and 17, as an adversarial review found them: a finished PodGroup's status stands
as its pods go, and the upstream dialect's groups are told in the words of the objects users wrote."""

from __future__ import annotations

from tests.builders import node, pod
from tests.core.test_podgroup_finished import ANN, Run


def test_a_completed_volcano_podgroup_stays_completed_as_its_pods_are_deleted() -> None:
    # Found by a review: the scheduler-plugins PodGroup keeps ``Finished``/``Failed`` once none of its pods is
    # live (koordinator.FINAL_PHASES), but a Volcano PodGroup had no such guard: once one of its
    # finished pods is deleted (by hand, by the pod GC, by a Job's TTL deleting them one by one)
    # the counts drop under minMember and koordpy rewrites a finished job's PodGroup
    # ``Completed, succeeded 3`` -> ``Pending, succeeded 2``.
    pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
          "metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 3}}
    run = Run(node("n0"), pg, *(pod(f"v-{i}", cpu="1", annotations={ANN: "g"}) for i in range(3)))
    run.cycle()
    run.phase("v-0", "v-1", "v-2", to="Running")
    run.phase("v-0", "v-1", "v-2", to="Succeeded")
    assert run.world.volcano_podgroups["default/g"].status.phase == "Completed"
    run.delete("v-0")
    status = run.world.volcano_podgroups["default/g"].status
    assert (status.phase, status.succeeded) == ("Completed", 3)


# -- issue 29, items 7 and 17: upstream-dialect messages in the words of the objects the user wrote ----


def test_a_composite_short_of_pods_is_told_in_its_own_words() -> None:
    # Found by a review: a CompositePodGroup (minGroupCount 2; children of minCount 3 and 2) whose pods are not all
    # created yet waits with Koordinator's "gang child pod not collect enough, gangName: default/train,
    # podNum: 4, minMember: 5": no object the user wrote has a minMember, nor says 5. The rendering
    # branches on what declares the gang (messages.render: ``declared_by == WORKLOAD_PODGROUP``, a
    # dialect test outside the dialects) and a composite falls to Koordinator's words; a PodGroup says
    # "waiting for minCount pods of PodGroup ... to exist".
    from tests.core.dialects.test_upstream import run as upstream_run
    from tests.core.dialects.test_upstream_composite import child, composite, pods_of

    out = upstream_run(node("n0"), composite(), child("a", 3), child("b", 2), *pods_of("a", 2, cpu="1"),
                       *pods_of("b", 2, cpu="1"))
    assert out.bound == {}
    for message in out.pending.values():
        assert "minMember" not in message and "not collect enough" not in message, message
        assert message.startswith("waiting for the pods of CompositePodGroup default/train to exist: 4 created, "
                                  "and its minGroupCount child PodGroups need at least 5"), message


def test_a_basic_groups_member_is_not_said_to_be_rejected_with_a_gang_group() -> None:
    # Found by a review: in a basic PodGroup (no quorum: kube-scheduler tries each pod, item 1) a member passed
    # over after one of its kind failed is told Koordinator's 'GangGroup "default/g" gets rejected due
    # to member Pod "default/g-0" is unschedulable ..., alreadyWaitForBound: 0': a basic group is no
    # gang and is not rejected whole for one member; kube-scheduler gives the pod its own failure.
    from tests.core.dialects.test_upstream import group, member
    from tests.core.dialects.test_upstream import run as upstream_run

    out = upstream_run(node("n0", cpu="1"), group("g"), *(member(f"g-{i}", cpu="3", group_name="g") for i in range(2)))
    assert out.bound == {}
    for message in out.pending.values():
        assert "GangGroup" not in message and "alreadyWaitForBound" not in message, message
    assert sorted(out.pending.values()) == ["0/1 nodes are available: 1 Insufficient cpu.",
                                            "pod group default/g is unschedulable: pod default/g-0: 0/1 nodes are "
                                            "available: 1 Insufficient cpu."]
