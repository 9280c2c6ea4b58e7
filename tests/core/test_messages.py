"""Every verdict's wording, rendered once from its structured reason (koordpy.core.messages).

The table is the catalogue of what koordpy writes on a pod, a PodGroup or an Event about a verdict:
Koordinator's coscheduling words, kube-scheduler's ``0/N nodes are available`` and preemption
words, Volcano's tiers, KAI's levels and koordpy's own, byte for byte as they were written before
the reasons were typed. A reason type without a row here fails ``test_every_reason_has_a_wording``.
"""

from __future__ import annotations

from typing import Any, get_args

import pytest

from koordpy.core.cycle import Cycle, schedule
from koordpy.core.messages import (
    claim_deleting,
    claim_lost,
    claim_not_found,
    claim_not_owned,
    claim_unreadable,
    ephemeral_claim_missing,
    group_name,
    insufficient,
    nodes_unavailable,
    render,
    untolerated_taint,
    volume_not_found,
)
from koordpy.core.state import SchedulerState
from koordpy.core.verdicts import (
    AdmittedElsewhere,
    Assigned,
    AssignmentUnmet,
    BeyondMinimum,
    BoundWithoutOwner,
    Code,
    CompositeMissing,
    CompositeShort,
    DevicesTogether,
    Failure,
    GangCount,
    GangStale,
    GangTimeoutEvent,
    GatedMembers,
    GroupMissing,
    GroupNamedOtherwise,
    GroupNameShared,
    GroupPreemptionPolicy,
    GroupPriority,
    GroupRefused,
    GroupSchedulers,
    GroupUnschedulable,
    Inside,
    JobFailed,
    KindsNoHyperNode,
    MarkedTimedOut,
    MemberRejected,
    MinResourcesShort,
    MinRuntimeProtected,
    NoCandidate,
    NodesFiltered,
    NoDomainAtLevel,
    NoExclusiveDomain,
    NoHyperNode,
    NotEligible,
    NotHelpful,
    OnePerNode,
    OwnerMissing,
    PeerNotBack,
    PeerUndeclared,
    PreBindConflict,
    PreemptedBy,
    Preempting,
    PreemptionDelayed,
    PreFilterReason,
    Reason,
    Refused,
    ReplacementsDoNotFit,
    RoomTakenBack,
    StaleEvicted,
    SubGroupLeft,
    SubGroupsNoHyperNode,
    Text,
    TierOffer,
    TimedOut,
    TooFewMembers,
    Verdict,
    VolumesTogether,
    WaitingForMembers,
    WithNotes,
    WithPreemption,
)
from koordpy.sim.simulator import World
from tests.builders import node, pod, podgroup

INSUFFICIENT = NodesFiltered(4, (("Insufficient cpu", 3), ("node(s) were unschedulable", 1)))
SAID = "0/4 nodes are available: 3 Insufficient cpu, 1 node(s) were unschedulable."
COUNTS = (GangCount("default/a", 2, 3), GangCount("default/b", 1, 1))
OFFERS = (TierOffer(1, 3, 4, "s0"), TierOffer(2, 5, 1, "the cluster"))

TABLE: list[tuple[Reason, str]] = [
    # -- pre_filter: the gang, its owner, its peers, its PodGroup ------------------------------
    (Text("a gang's own parse error"), "a gang's own parse error"),
    (OwnerMissing("JobSet", "default", "js", "default/js-0", 30.0),
     "waiting for its owner JobSet default/js to appear (koordpy reads topology constraints from it): pod "
     "default/js-0 is not placed without it for 30s after its creation"),
    (MarkedTimedOut("default/g", "gang.scheduling.koordinator.sh/timeout"),
     'gang "default/g" timed out waiting for its members and will not be scheduled '
     "(gang.scheduling.koordinator.sh/timeout=true); delete and recreate its pods to try again"),
    (TooFewMembers("default/g", 2, 4),
     "gang child pod not collect enough, gangName: default/g, podNum: 2, minMember: 4"),
    (GatedMembers("default/g", 2, 4, 3),
     "gang default/g waits for its gated members: 2 of its 4 pods still have spec.schedulingGates, and the others "
     "cannot reach minMember 3"),
    (PeerUndeclared("default/a", "default/b"),
     'gang "default/a" names "default/b" in its groups, but no PodGroup or pod declares that gang'),
    (PeerUndeclared("default/a", "default/b", "minMember must be a number"),
     'gang "default/a" names "default/b" in its groups, but no PodGroup or pod declares that gang: minMember must '
     "be a number"),
    (PeerNotBack("default/a", "other/b", True),
     'gang "default/a" names "other/b" in another namespace in its groups, which does not name it back; it waits '
     'until "other/b" has its minimum bound'),
    (PeerNotBack("default/a", "default/b", False),
     'gang "default/a" names "default/b" in its groups, which does not name it back; it waits until "default/b" '
     "has its minimum bound"),
    (MinResourcesShort("default/g", "cpu", 12500, 8000),
     "PodGroup default/g minResources not available: cpu wants 12500m, the cluster has 8 free"),
    (TimedOut("default/a,default/b", 30.0, COUNTS),
     'GangGroup "default/a,default/b" timed out after 30s waiting for its members (default/a 2/3, default/b 1/1); '
     "reservations released"),
    (GangTimeoutEvent(2.5), "gang did not reach its minimum within 2.5s"),
    # -- stale gangs -----------------------------------------------------------------------------
    (GangStale("default/a", 1_800_000_000.0, 3, 8, 1_800_000_060.0),
     "gang default/a is stale since 2027-01-15T08:00:00Z: 3 members running, minimum 8; its running members are "
     "evicted at 2027-01-15T08:01:00Z unless replacements bind"),
    (GangStale("default/a", 1_800_000_000.0, 1, 4, None, (1, 2)),
     "gang default/a is stale since 2027-01-15T08:00:00Z: 1 member running, minimum 4, 1 of the 2 parts it needs "
     "at their own minimum; its grace is negative: reported only, never evicted"),
    (GangStale("default/JobSet/t/attempt-0", 1_800_000_000.0, 4, 2, None, (1, 2),
               declared_by="JobSet t's pods (restart attempt 0)"),
     "gang default/JobSet/t/attempt-0 is stale since 2027-01-15T08:00:00Z: 4 members running, minimum 2, 1 of the "
     "2 Jobs it needs with a pod running; its grace is negative: reported only, never evicted"),
    (StaleEvicted("default/JobSet/t/attempt-0", 4, 2, 60.0, (1, 2), "JobSet t's pods (restart attempt 0)"),
     "gang default/JobSet/t/attempt-0 ran below its minimum (4 members running, minimum 2, 1 of the 2 Jobs it "
     "needs with a pod running) for its grace of 60s: evicted so that its controller starts it again whole"),
    (GangStale("default/a", 1_800_000_000.0, 3, 8, 1_800_000_060.0, held=True),
     "gang default/a is stale since 2027-01-15T08:00:00Z: 3 members running, minimum 8; its grace ended; its "
     "eviction waits while its pending members bind or hold the room a preemption is making for them"),
    (GangStale("default/a", 1_800_000_000.0, 3, 8, None, by="Kueue", what="workload default/job-a-1a2b3",
               recovers="its waitForPodsReady requeues it"),
     "gang default/a is stale since 2027-01-15T08:00:00Z: 3 members running, minimum 8; Kueue admitted it (workload "
     "default/job-a-1a2b3) and recovers it (its waitForPodsReady requeues it): koordpy reports it only, never "
     "evicts it"),
    (StaleEvicted("default/a", 3, 8, 60.0),
     "gang default/a ran below its minimum (3 members running, minimum 8) for its grace of 60s: evicted so that "
     "its controller starts it again whole"),
    (WaitingForMembers("default/a,default/b", COUNTS, 2),
     'GangGroup "default/a,default/b" is waiting for its members: default/a 2/3, default/b 1/1, '
     "alreadyWaitForBound: 2"),
    # -- refused pod-spec fields ---------------------------------------------------------------
    (DevicesTogether(4, "n1", "cannot allocate all claims (resourceclaim default/g-1-gpus, request gpus: too few of "
                             "the devices that match are free (0 of 8))"),
     "0/4 nodes are available: cannot allocate all claims (resourceclaim default/g-1-gpus, request gpus: too few of "
     "the devices that match are free (0 of 8)) (on n1, with the members of its job before it placed)."),
    (GroupNamedOtherwise("default/p", "x"),
     "koordpy does not schedule this Workload PodGroup (spec.schedulingGroup) yet: pod default/p names its group by "
     "'x', which koordpy does not read; it stays pending"),
    (GroupMissing("default/p", "default", "workers"),
     "waiting for PodGroup default/workers (scheduling.k8s.io), which pod default/p names in "
     "spec.schedulingGroup, to exist"),
    (GroupRefused("default/p", "workers", True, 4),
     "koordpy does not schedule this Workload PodGroup (spec.schedulingGroup) yet: pod default/p belongs to PodGroup "
     "'workers' with gang policy (minCount 4), which kube-scheduler's GangScheduling plugin would apply; it stays "
     "pending"),
    (GroupRefused("default/p", "workers", False, None, ("schedulingConstraints", "resourceClaims")),
     "koordpy does not schedule this Workload PodGroup (spec.schedulingGroup) yet: pod default/p belongs to PodGroup "
     "'workers' with schedulingConstraints, resourceClaims, which kube-scheduler's GangScheduling plugin would "
     "apply; it stays pending"),
    (GroupSchedulers("default/p", "default/workers", ("default-scheduler", "koordpy")),
     "PodGroup default/workers (scheduling.k8s.io) is refused: its pods name different schedulerNames "
     "(default-scheduler, koordpy), and only one scheduler may place a group; pod default/p stays pending"),
    (GroupPriority("default/p", "default/workers", 100, 0),
     "PodGroup default/workers (scheduling.k8s.io) is refused: pod default/p has priority 100 and the group 0; "
     "every pod of a group must have the group's priority"),
    (GroupPreemptionPolicy("default/p", "default/train", "Never", "PreemptLowerPriority", "CompositePodGroup"),
     "CompositePodGroup default/train (scheduling.k8s.io) is refused: pod default/p has preemptionPolicy Never and "
     "the group PreemptLowerPriority; every pod of a group must have the group's preemptionPolicy"),
    (GroupSchedulers("default/p", "default/train", ("default-scheduler", "koordpy"), "CompositePodGroup"),
     "CompositePodGroup default/train (scheduling.k8s.io) is refused: its pods name different schedulerNames "
     "(default-scheduler, koordpy), and only one scheduler may place a group; pod default/p stays pending"),
    (CompositeMissing("default/p", "default/workers", "default/train"),
     "waiting for CompositePodGroup default/train (scheduling.k8s.io/v1alpha3), which PodGroup default/workers of "
     "pod default/p names in spec.parentCompositePodGroupName, to exist"),
    (CompositeShort("default/train", 2, (("c0", 2, 2), ("c1", 1, 2))),
     "CompositePodGroup default/train waits for 2 child PodGroups (minGroupCount) to have their minimum of pods: "
     "1 of its 2 have (c0 2/2, c1 1/2)"),
    (CompositeShort("default/train", 1, ()),
     "CompositePodGroup default/train waits for 1 child PodGroups (minGroupCount) to have their minimum of pods: "
     "0 of its 0 have (no child PodGroup names it)"),
    (GroupNameShared("default/p", "default/train"),
     "PodGroup default/train and CompositePodGroup default/train (scheduling.k8s.io) share a namespace and name, "
     "which koordpy cannot tell apart; pod default/p stays pending until one is renamed"),
    (Refused("default/g", GroupMissing("default/p", "default", "workers")),
     'GangGroup "default/g" waits as a whole: waiting for PodGroup default/workers (scheduling.k8s.io), which pod '
     "default/p names in spec.schedulingGroup, to exist"),
    (JobFailed("KeyError", "'x'"),
     "koordpy failed while scheduling this job and skipped it: KeyError: 'x'; the rest of the queue was scheduled"),
    # -- kube-scheduler's node counts and what placement adds to them ----------------------------
    (NodesFiltered(3), "0/3 nodes are available."),
    (INSUFFICIENT, SAID),
    (NodesFiltered(4, (("Insufficient cpu", 3), (PreFilterReason('persistentvolumeclaim "d" not found'), 4))),
     '0/4 nodes are available: persistentvolumeclaim "d" not found.'),
    (Inside(INSUFFICIENT), SAID),
    (Inside(INSUFFICIENT, "block-a"),
     "0/4 nodes are available: 3 Insufficient cpu, 1 node(s) were unschedulable inside block-a, the widest domain "
     "the job's topology requirement allows."),
    # Issue 29, item 8: the next domains of that level were tried too, and the search is bounded.
    (Inside(INSUFFICIENT, "block-a", ("block-b",)),
     "0/4 nodes are available: 3 Insufficient cpu, 1 node(s) were unschedulable inside block-a, the widest domain "
     "the job's topology requirement allows (block-b, the next of that level, failed too)."),
    (Inside(INSUFFICIENT, "block-a", ("block-b", "block-c"), 3),
     "0/4 nodes are available: 3 Insufficient cpu, 1 node(s) were unschedulable inside block-a, the widest domain "
     "the job's topology requirement allows (block-b, block-c, the next of that level, failed too; 3 more of that "
     "level with room were not tried)."),
    (OnePerNode(INSUFFICIENT, True),
     "0/4 nodes are available: 3 Insufficient cpu, 1 node(s) were unschedulable; at most one member per node, as "
     "they share host ports."),
    (OnePerNode(INSUFFICIENT, False, ("kubernetes.io/hostname", "rack")),
     "0/4 nodes are available: 3 Insufficient cpu, 1 node(s) were unschedulable; at most one member per node, as "
     "anti-affinity between them on kubernetes.io/hostname, rack."),
    (WithNotes(INSUFFICIENT, ("layer rack is ignored", "layer row is ignored")),
     "0/4 nodes are available: 3 Insufficient cpu, 1 node(s) were unschedulable; layer rack is ignored; layer row "
     "is ignored."),
    (VolumesTogether(4, "node(s) exceed max volume count"),
     "0/4 nodes are available: node(s) exceed max volume count (with the other members of its job placed "
     "together)."),
    (PreBindConflict(4, "node(s) didn't find available persistent volumes to bind"),
     "0/4 nodes are available: node(s) didn't find available persistent volumes to bind."),
    # -- topology: Koordinator's gather, a Topology's levels, Volcano's tiers, KAI's levels ------
    (NoCandidate(8, 4, True, "cluster", (("block", "block/b0", 3), ("block", "block/b1", 2))),
     "0/8 nodes are available: no candidate topology nodes can accommodate job, desiredOfferSlot: 4, topology "
     "topologyNode block/b0: 3;topology topologyNode block/b1: 2."),
    (NoCandidate(8, 4, False, "cluster", (("rack", "r0", 3), ("rack", "r1", 2)), more=2,
                 split=((2, "rack"), (4, "block")), unlike=True, filtered=(("node(s) were unschedulable", 1),)),
     "0/8 nodes are available: no candidate topology nodes can accommodate job, desiredOfferSlot: 4, Topology "
     "cluster: rack=r0: 3;rack=r1: 2;... 2 more; podCountMultiple: 4 pods cannot be split into multiples of 2 per "
     "rack domain and 4 per block domain; podCountMultiple is set, so unlike members are only placed with their "
     "common shape; 1 node(s) were unschedulable."),
    (NoHyperNode(8, True, 2, 6, OFFERS),
     "0/8 nodes are available: network topology (hard, highest tier 2): no HyperNode can take all 6 pods; largest "
     "offerslot per tier: tier 1: 3 (best of 4: s0), tier 2: 5 (the cluster)."),
    (NoHyperNode(8, False, None, 6),
     "0/8 nodes are available: network topology (soft): no HyperNode can take all 6 pods."),
    (KindsNoHyperNode(8, 2, 6, 3, 3, OFFERS),
     "0/8 nodes are available: network topology: no HyperNode within tier 2 takes all 6 pods, each kind of pod "
     "where it fits; largest offerslot per tier: tier 1: 3 (best of 4: s0), tier 2: 5 (the cluster)."),
    (KindsNoHyperNode(8, 2, 6, 1, 3),
     "0/8 nodes are available: network topology: none of the first 1 candidate HyperNodes within tier 2 takes all "
     "6 pods, each kind of pod where it fits (the search stopped at its work bound after 1 of 3 candidate "
     "HyperNodes; the others were not tried)."),
    (SubGroupsNoHyperNode(8, 2, 2, 2, (("a", 2), ("b", 0)), (("job/a-0", 2, 1), ("job/b-0", 3, None))),
     "0/8 nodes are available: network topology: no HyperNode within tier 2 holds 2 of policy a sub-groups the "
     "job needs, each inside one HyperNode of its own tier limit: job/a-0 (2 pods, highest tier 1), job/b-0 (3 "
     "pods, highest tier any)."),
    (SubGroupsNoHyperNode(8, 2, 2, 2, (("a", 0),), ()),
     "0/8 nodes are available: network topology: no HyperNode within tier 2 holds the sub-groups the job needs, "
     "each inside one HyperNode of its own tier limit: ."),
    (SubGroupLeft("job/a-1", 2, 3, "s1"),
     "sub-group job/a-1 (2 pending pods, size 3) does not fit inside one HyperNode of its tier limit within "
     "HyperNode s1, the job's limit around where its other sub-groups went"),
    (SubGroupLeft("job/a-1", 2, 3, ""),
     "sub-group job/a-1 (2 pending pods, size 3) does not fit inside one HyperNode of its tier limit within "
     "the cluster, the job's limit around where its other sub-groups went"),
    # -- a CompositePodGroup's children (issue 29, item 7): Kubernetes' words ---------------------------
    (SubGroupsNoHyperNode(4, 2, 2, 2, (("", 2),), (("default/c0", 1, 1), ("default/c1", 2, None)),
                          (TierOffer(2, 1, 2, "ra"),), "default/train", ((2, "rack"), (1, "host"), (0, "node")),
                          (1, 2)),
     "0/4 nodes are available: CompositePodGroup default/train: no domain of rack holds 2 of its child PodGroups "
     "at once, each with its minimum of pods inside one domain of its own topology key: default/c0 (1 pending "
     "pods, minimum 1, topology key host), default/c1 (2 pending pods, minimum 2); the most pods a domain takes: "
     "rack: 1 (best of 2: ra)."),
    (SubGroupsNoHyperNode(4, 1, 1, 3, (("", 1),), (("default/c0", 2, None),), (TierOffer(1, 3, 1, "the cluster"),),
                          "default/train", ((0, "node"),), (2,), 1),
     "0/4 nodes are available: CompositePodGroup default/train: the cluster does not hold 1 more of its child "
     "PodGroups at once, each with its minimum of pods inside one domain of its own topology key: default/c0 (2 "
     "pending pods, minimum 2) (the search stopped at its work bound after 1 of 3 candidate domains; the others "
     "were not tried); the most pods a domain takes: the cluster: 3."),
    (SubGroupLeft("default/c1", 3, 2, "", 0, "default/train"),
     "child PodGroup default/c1 of CompositePodGroup default/train (3 pending pods, minimum 2) does not fit within "
     "the cluster"),
    (SubGroupLeft("default/c1", 3, 2, "ra", 2, "default/train", "rack", "host"),
     "child PodGroup default/c1 of CompositePodGroup default/train: 1 of its 3 pending pods do not fit inside one "
     "domain of its topology key host beside the 2 placed (minimum 2) within rack=ra"),
    (NoDomainAtLevel(8, "cluster", "rack", "block", 5, (("b0", 4), ("the cluster", 0))),
     "0/8 nodes are available: no domain of Topology cluster at or above rack within block can take all 5 pods; "
     "offerslots at block: b0 4, the cluster 0."),
    (NoExclusiveDomain(6, "t-w-1", 4, "rack", (("a", 1), ("c", 3)), ("b",)),
     "0/6 nodes are available: Job t-w-1 needs a domain of rack of its own with room for all its 4 pods (JobSet "
     "exclusive placement); room for them: a 1, c 3; held by its JobSet's other Jobs: b."),
    (NoExclusiveDomain(6, "t-w-1", 4, "rack"),
     "0/6 nodes are available: Job t-w-1 needs a domain of rack of its own with room for all its 4 pods (JobSet "
     "exclusive placement); room for them: none."),
    (NoExclusiveDomain(6, "t-w-0", 3, "rack", (("b", 1),), (), "b"),
     "0/6 nodes are available: Job t-w-0 runs in rack=b, which has room for 1 of its 3 pending pod(s) (JobSet "
     "exclusive placement: a Job's pods share its leader's domain)."),
    # -- the GangGroup's words for its members, preemption -----------------------------------------
    (WithPreemption(INSUFFICIENT, ""), SAID),
    (WithPreemption(INSUFFICIENT, "preemption: not helpful: no candidate takes all 4 pods once its lower-priority "
                                  "pods are gone."),
     f"{SAID} preemption: not helpful: no candidate takes all 4 pods once its lower-priority pods are gone."),
    (MemberRejected("default/a", "default/a-0", INSUFFICIENT, 1),
     f'GangGroup "default/a" gets rejected due to member Pod "default/a-0" is unschedulable with reason "{SAID}", '
     "alreadyWaitForBound: 1"),
    (MemberRejected("default/a", "default/a-0", INSUFFICIENT, 0, "preemption: not eligible due to "
                                                                 "preemptionPolicy=Never."),
     f'GangGroup "default/a" gets rejected due to member Pod "default/a-0" is unschedulable with reason "{SAID}", '
     "alreadyWaitForBound: 0. preemption: preemption already attempted by default/a-0 with message not eligible "
     "due to preemptionPolicy=Never."),
    (GroupUnschedulable("default/a", "default/a-0", INSUFFICIENT),
     f"pod group default/a is unschedulable: pod default/a-0: {SAID}"),
    (GroupUnschedulable("default/a", "default/a-0", INSUFFICIENT, "preemption: not helpful: no candidate takes all "
                                                                   "2 pods once its lower-priority pods are gone."),
     f"pod group default/a is unschedulable: pod default/a-0: {SAID} preemption: not helpful: no candidate takes "
     "all 2 pods once its lower-priority pods are gone."),
    (TooFewMembers("default/c", 4, 5, "CompositePodGroup scheduling.k8s.io"),
     "waiting for the pods of CompositePodGroup default/c to exist: 4 created, and its minGroupCount child "
     "PodGroups need at least 5 (each its own minCount)"),
    (TooFewMembers("default/JobSet/t/attempt-0", 5, 6, "JobSet t's pods (restart attempt 0)"),
     "waiting for JobSet t's pods (restart attempt 0) to exist: 5 created, minimum 6, what its Jobs still run "
     "at once"),
    (TooFewMembers("default/JobSet/t/attempt-0/w", 1, 2, "JobSet t's pods of replicatedJob w (restart attempt 0)",
                   parts=True),
     "waiting for JobSet t's pods of replicatedJob w (restart attempt 0) to exist: 1 created, minimum 2, what "
     "its Jobs need first (a Job placed exclusively counts its leader alone: JobSet's webhook makes its other pods "
     "only once the leader is bound)"),
    (BeyondMinimum("default/a", 3, 5, INSUFFICIENT),
     f'GangGroup "default/a" reached its minimum with 3 of 5 pending members bound; the rest wait: "{SAID}"'),
    (ReplacementsDoNotFit("default/a", "rack-1", 2, INSUFFICIENT),
     f'gang "default/a" lost members and cannot take the 2 replacement(s) it needs together inside rack-1, where '
     f'its running members are: "{SAID}"'),
    (ReplacementsDoNotFit("default/a", "", 1, INSUFFICIENT, "preemption: not helpful: no candidate takes all 1 "
                                                             "pods once its lower-priority pods are gone."),
     f'gang "default/a" lost members and cannot take the 1 replacement(s) it needs together anywhere: "{SAID}" '
     "preemption: not helpful: no candidate takes all 1 pods once its lower-priority pods are gone."),
    (NotEligible("never"), "preemption: not eligible due to preemptionPolicy=Never."),
    (NotEligible("terminating"), "preemption: not eligible due to terminating pod on the nominated node."),
    (NotHelpful(4, 3, "block/b0"),
     "preemption: not helpful: even without every lower-priority pod, no candidate can take all 4 pods (the most "
     "is 3, in block/b0)."),
    (NotHelpful(4), "preemption: not helpful: no candidate takes all 4 pods once its lower-priority pods are gone."),
    (RoomTakenBack("n0"), "preemption: room taken back from lower-priority nominations in n0."),
    (Preempting(("default/v0", "default/v1", "default/v2", "default/v3", "default/v4"), 2, "block/b0"),
     "preemption: preempting 5 lower-priority pod(s) of 2 job(s) in block/b0 (default/v0, default/v1, default/v2 "
     "and 2 more); the job is nominated there and waits for them to terminate."),
    (Preempting(("default/v0",), 1, "n0"),
     "preemption: preempting 1 lower-priority pod(s) of 1 job(s) in n0 (default/v0); the job is nominated there "
     "and waits for them to terminate."),
    (Preempting(("default/v0",), 1, "n0", (("default/db", 1), ("ml/web", 2)), ("default/v1",)),
     "preemption: preempting 1 lower-priority pod(s) of 1 job(s) in n0 (default/v0); it evicts 1 pod(s) of "
     "PodDisruptionBudget default/db beyond its budget; it evicts 2 pod(s) of PodDisruptionBudget ml/web beyond its "
     "budget; PodDisruptionBudgets kept default/v1 running; the job is nominated there and waits for them to "
     "terminate."),
    (PreemptionDelayed(40.2, 1767226020.0, 120.0, "PodGroup default/a spec.preemptionDelay"),
     "preemption: would preempt in 40 s (at 2026-01-01T00:07:00Z), once its preemption delay of 2 min (PodGroup "
     "default/a spec.preemptionDelay) has passed; free room it takes at once."),
    (MinRuntimeProtected("default/train", 190.0, 600.0),
     "preemption: victim default/train is protected by its minimum runtime: runs for 3 min of its 10; preemption is "
     "tried again when that has passed."),
    (MinRuntimeProtected("default/v", 30.0, 90.0, others=2),
     "preemption: victim default/v is protected by its minimum runtime (and 2 more job(s)): runs for 30 s of its 90; "
     "preemption is tried again when that has passed."),
    (AdmittedElsewhere("default/v", "Kueue", "workload default/job-v-1a2b3"),
     "preemption: victim default/v is not preempted: Kueue admitted it (workload default/job-v-1a2b3); Kueue's own "
     "preemption decides; the job waits for room."),
    (AdmittedElsewhere("default/v", "Kueue", "", others=3),
     "preemption: victim default/v (and 3 more pod(s)) is not preempted: Kueue admitted it; Kueue's own preemption "
     "decides; the job waits for room."),
    (AssignmentUnmet(NodesFiltered(2, (("Insufficient cpu", 1),
                                       ("node(s) didn't match Pod's node affinity/selector", 1))),
                     "Kueue", (("example.com/rack", "r1"),), "workload default/job-v-1a2b3",
                     "its waitForPodsReady requeues it"),
     "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector; Kueue's "
     "topology assignment for workload default/job-v-1a2b3 (nodeSelector example.com/rack=r1) cannot take the job "
     "now: koordpy places the pod nowhere else; its waitForPodsReady requeues it if this lasts."),
    (AssignmentUnmet(Text("no room."), "Kueue", (("a", "1"), ("b", "2"))),
     "no room; Kueue's topology assignment (nodeSelector a=1, b=2) cannot take the job now: koordpy places the pod "
     "nowhere else."),
    (PreemptedBy(("default/a", "default/b"), "default/a-0"),
     "koordpy: preempting to accommodate higher priority pods, preemptor: default/a,default/b, triggerpod: "
     "default/a-0"),
    # -- binding ---------------------------------------------------------------------------------
    (Assigned("default/p", "n0"), "Successfully assigned default/p to n0"),
    (BoundWithoutOwner("JobSet", "default", "js", 30.0),
     "bound without its owner JobSet default/js, which koordpy did not see within 30s of the pod's creation: no "
     "topology constraint the owner declares was applied"),
]


@pytest.mark.parametrize(("reason", "text"), TABLE, ids=[f"{i}-{type(r).__name__}" for i, (r, _) in enumerate(TABLE)])
def test_each_reason_renders_its_one_wording(reason: Reason, text: str) -> None:
    assert render(reason) == text


def test_every_reason_has_a_wording() -> None:
    """A reason type added to the union gets its row in the table (and so its wording documented)."""
    assert set(get_args(Reason)) == {type(r) for r, _ in TABLE}


# The per-node reasons built from a value (the constant ones are imported by tests of their filters).
PER_NODE: list[tuple[str, str]] = [
    (untolerated_taint("gpu", "true"), "node(s) had untolerated taint {gpu: true}"),
    (insufficient("nvidia.com/gpu"), "Insufficient nvidia.com/gpu"),
    (claim_unreadable("data", "spec.resources: bad"),
     'persistentvolumeclaim "data" cannot be read: spec.resources: bad'),
    (ephemeral_claim_missing("p-scratch"),
     'waiting for ephemeral volume controller to create the persistentvolumeclaim "p-scratch"'),
    (claim_not_found("data"), 'persistentvolumeclaim "data" not found'),
    (claim_lost("data", "pv-1"), 'persistentvolumeclaim "data" bound to non-existent persistentvolume "pv-1"'),
    (claim_deleting("data"), 'persistentvolumeclaim "data" is being deleted'),
    (claim_not_owned("default/p-scratch", "default/p"),
     "PVC default/p-scratch was not created for pod default/p (pod is not owner)"),
    (volume_not_found("pv-1"), 'persistentvolume "pv-1" not found'),
]


@pytest.mark.parametrize(("reason", "text"), PER_NODE)
def test_each_per_node_reason_has_its_wording(reason: str, text: str) -> None:
    assert reason == text


def test_volume_prefilter_reasons_are_said_alone() -> None:
    for reason in (claim_unreadable("d", "x"), ephemeral_claim_missing("d"), claim_not_found("d"), claim_lost("d", "v"),
                   claim_deleting("d"), claim_not_owned("n/d", "n/p"), volume_not_found("v")):
        assert isinstance(reason, PreFilterReason)
        assert nodes_unavailable(3, (("Insufficient cpu", 2), (reason, 3))) == f"0/3 nodes are available: {reason}."


def test_node_counts_are_sorted_and_a_prefilter_reason_is_said_alone() -> None:
    """kube-scheduler's order: reasons sorted by text, whatever order the filters counted them in."""
    counts = (("node(s) were unschedulable", 1), ("Insufficient memory", 2), ("Insufficient cpu", 1))
    assert nodes_unavailable(4, counts) == ("0/4 nodes are available: 1 Insufficient cpu, 2 Insufficient memory, "
                                            "1 node(s) were unschedulable.")
    first = PreFilterReason("pod has unbound immediate PersistentVolumeClaims")
    assert nodes_unavailable(4, (("Insufficient cpu", 1), (first, 3))) == f"0/4 nodes are available: {first}."
    assert group_name(("a/x", "a/y")) == group_name("a/x,a/y") == "a/x,a/y"


def test_a_failure_is_resolvable_only_when_its_code_says_unschedulable() -> None:
    p = World.from_objects([("t", pod("p"))]).pods["default/p"]
    assert Failure(p, INSUFFICIENT).resolvable
    assert not Failure(p, INSUFFICIENT, code=Code.UNRESOLVABLE).resolvable


def _cycle(*objects: dict[str, Any], state: SchedulerState | None = None, now: float = 0.0) -> Cycle:
    world = World.from_objects([("t", o) for o in objects])
    cycle = Cycle(world.snapshot(frozenset({"koordpy"})), state or SchedulerState(), now)
    cycle.gangs = cycle.view.gangs
    return cycle


def test_pre_filter_gives_a_typed_verdict_with_its_intent_and_wake_hint() -> None:
    cycle = _cycle(node("n0"), podgroup("g", 3), pod("g-0", cpu="1", group="g"), pod("g-1", cpu="1", group="g"))
    job = next(j for j in cycle.view.queue.jobs() if j.is_gang)
    assert cycle.pre_filter(job) == Verdict(Code.WAIT, TooFewMembers("default/g", 2, 3), "changed")


def test_an_expired_wait_is_a_timed_out_verdict_not_a_sentinel() -> None:
    """pre_filter only judges (Code.TIMED_OUT); the cycle then releases what the GangGroup holds and
    the pods say how many members each gang had."""
    objects = [node("n0", cpu="2"), podgroup("g", 3, timeout=None, annotations={
        "gang.scheduling.koordinator.sh/mode": "NonStrict", "gang.scheduling.koordinator.sh/waiting-time": "5s"})]
    objects += [pod(f"g-{i}", cpu="1", group="g") for i in range(3)]
    state = SchedulerState()
    snapshot = World.from_objects([("t", o) for o in objects]).snapshot(frozenset({"koordpy"}))
    schedule(snapshot, state, 0.0)  # NonStrict: two members reserved, the wait starts
    assert len(state.reserved) == 2 and state.wait_since
    cycle = _cycle(*objects, state=state, now=10.0)
    job = next(j for j in cycle.view.queue.jobs() if j.is_gang)
    verdict = cycle.pre_filter(job)
    assert verdict == Verdict(Code.TIMED_OUT, TimedOut("default/g", 5.0), None)
    out = schedule(snapshot, state, 10.0)
    assert out.waiting["default/g-0"] == ('GangGroup "default/g" timed out after 5s waiting for its members '
                                          "(default/g 0/3); reservations released")
