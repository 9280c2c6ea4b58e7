"""JobSet's dialect (``jobset.x-k8s.io``): the pods of one JobSet that no other gang declaration
claims are one gang, and JobSet's exclusive placement (``alpha.jobset.sigs.k8s.io/exclusive-topology``)
is a ``Requirement`` of the "exclusive" style over the tree of that node label.

A JobSet has no gang object: its Jobs' pods say which JobSet they run for (their owner chain, Pod ->
Job -> JobSet) and which restart attempt (``jobset.sigs.k8s.io/restart-attempt``), so the gang's key
is ``namespace/JobSet/name/attempt-N``: a restart (the JobSet controller deletes every Job and makes
them again with the attempt one higher) is a new gang, and nothing the scheduler remembers of the
old attempt's gang (its stale clock, that it met its minimum) touches the new one. A JobSet that
makes a replicatedJob's Jobs only once others are ready (``startupPolicy: InOrder``, ``dependsOn``)
is a gang per stage, the replicatedJobs it makes at once (``.../attempt-N/<replicatedJob>``,
``stage``): waiting for all of it at once would wait forever.

The minimum is what the JobSet's Jobs still run at once: per Job its parallelism, never more than
the completions it still lacks (its pods that finished are handed in: the dialect is ``Finishing``);
for a Job placed exclusively (its pods' annotation says so), one pod, its leader (completion index 0),
until one of its other pods ran: JobSet's pod webhook refuses a Job's other pods until the leader is
bound (and then pins them to its domain), so a gang waiting for them would never bind. Such a gang is
a gang of parts (``Gang.parts``): every Job with pods to run must have a member placed, so the leaders
bind together, each where its whole Job fits (docs/design.md, "JobSet").

Does not belong here: the owner chain (``koordpy.core.owners``), parsing the JobSet
(``koordpy.api.owners``), the search of the exclusive style (``koordpy.core.placement.exclusive``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from koordpy.api.kinds import Role
from koordpy.api.objects import Pod
from koordpy.api.owners import (
    ANN_EXCLUSIVE,
    ANN_NODE_SELECTOR_STRATEGY,
    JOBSET_API_VERSION,
    Owner,
    ReplicatedJob,
)
from koordpy.api.podgroup import GangConfig
from koordpy.api.workload import JOB_COMPLETION_INDEX
from koordpy.core.dialects.base import ExplainsBase, GangsBase, GroupTerms, TopologiesBase
from koordpy.core.messages import JOBSET_PODS, jobset_minimum
from koordpy.core.model import Asked, Gang, TopologyFacts, TreeSource, creation_time, earliest
from koordpy.core.naming import natural_key
from koordpy.core.owners import chain, parent
from koordpy.core.requirement import Requirement, SubGroup
from koordpy.core.snapshot import Snapshot
from koordpy.core.tree import TopologyTree, TreeKey, label_levels_tree

NAME = "jobset"
KIND = "JobSet"
GROUP = JOBSET_API_VERSION.rpartition("/")[0]
# What the JobSet controller writes on every pod of its Jobs (and JobSet's pod webhook reads).
LABEL_JOBSET = "jobset.sigs.k8s.io/jobset-name"
LABEL_REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
LABEL_JOB_INDEX = "jobset.sigs.k8s.io/job-index"
LABEL_RESTART = "jobset.sigs.k8s.io/restart-attempt"

_KEY = re.compile(r"[^/]+/JobSet/[^/]+/attempt-[0-9]+(?:/[^/]+)?")
# The rank of the domains of an exclusive key in its tree (nodes are 0, the cluster 2).
DOMAIN_RANK = 1


def gang_key(namespace: str, jobset: str, attempt: str, replicated_job: str | None = None) -> str:
    """The gang of a JobSet's restart attempt (of one of its replicatedJobs, for a JobSet that starts
    them in turn)."""
    key = f"{namespace}/{KIND}/{jobset}/attempt-{attempt}"
    return f"{key}/{replicated_job}" if replicated_job else key


def tree_key(label: str) -> TreeKey:
    """The tree of the domains of the node label ``label`` (a JobSet's exclusive key)."""
    return TreeKey(NAME, label, f"exclusive/{label}")


def staged(owner: Owner) -> bool:
    """Whether the JobSet makes some replicatedJob's Jobs only once others are ready."""
    return owner.in_order or any(j.depends_on for j in owner.replicated_jobs)


def stage(owner: Owner, replicated_job: str) -> str:
    """The replicatedJob whose gang ``replicated_job``'s pods are in, for a JobSet that starts them in
    turn: with ``startupPolicy: InOrder`` each its own; with ``dependsOn``, one that depends on another
    its own, and those that depend on none, which the JobSet makes at once with its first, the first's."""
    if owner.in_order:
        return replicated_job
    first = next((j.name for j in owner.replicated_jobs if not j.depends_on), None)
    said = next((j for j in owner.replicated_jobs if j.name == replicated_job), None)
    return first if first is not None and said is not None and not said.depends_on else replicated_job


def exclusive_key(pod: Pod) -> str:
    """The node label whose domains the pod's Job takes alone, as the JobSet controller wrote it on
    the pod; "" for none, and for the node-selector strategy (its pods are created at once, held to
    the nodes labelled for their Job by their own nodeSelector)."""
    if ANN_NODE_SELECTOR_STRATEGY in pod.annotations:
        return ""
    return pod.annotations.get(ANN_EXCLUSIVE, "")


def job_name(pod: Pod) -> str:
    """The name of the pod's Job, as the JobSet controller names it (``<jobset>-<replicatedJob>-<index>``)."""
    labels = pod.labels
    return f"{labels.get(LABEL_JOBSET, '')}-{labels.get(LABEL_REPLICATED_JOB, '')}-{labels.get(LABEL_JOB_INDEX, '')}"


def _attempt(pod: Pod) -> str:
    said = pod.labels.get(LABEL_RESTART, "0")
    return said if said.isdigit() else "0"


def _jobset_ref(pod: Pod, owners: dict[str, Owner]) -> tuple[str, Owner | None] | None:
    """The name of the JobSet at the top of the pod's owner chain, and that JobSet when it is known."""
    ref, owner = chain(pod, owners)
    if ref is None or ref.kind != KIND or ref.api_version.rpartition("/")[0] != GROUP:
        return None
    return ref.name, owner


def _replicated(owner: Owner | None) -> dict[str, ReplicatedJob]:
    return {j.name: j for j in owner.replicated_jobs} if owner is not None else {}


@dataclass(frozen=True)
class ExclusiveAsk:
    """JobSet's exclusive placement over the node label ``label``: each Job in a domain of its own where
    all its pods fit (``sizes``: the pods each Job, by name, still runs at once; a Job not named, of a
    JobSet whose Jobs are not known, needs room for the pods it has)."""

    label: str
    sizes: tuple[tuple[str, int], ...]
    # A Job's pods created after its leader bound must still go where it runs (JobSet's webhook pins
    # them there; a pod recreated later is held there too).
    keeps_gang = True

    def requirement(self, gang: Gang, pods: list[Pod], trees: TreeSource, snapshot: Snapshot) -> Asked | None:
        key = tree_key(self.label)
        tree = trees[key]
        sizes = dict(self.sizes)
        jobs: dict[str, list[Pod]] = {}
        job_of: dict[str, str] = {}
        for p in gang.pods:
            if exclusive_key(p) == self.label:
                name = job_of[p.key] = job_name(p)
                jobs.setdefault(name, []).append(p)
        # The pods to place by Job, in one pass (not one pass over them per Job: a JobSet may have hundreds).
        placing: dict[str, list[str]] = {}
        for p in pods:
            if (job := job_of.get(p.key)) is not None:
                placing.setdefault(job, []).append(p.key)
        subgroups = []
        for name, members in sorted(jobs.items(), key=lambda kv: natural_key(kv[0])):
            live = [p for p in members if p.node_name and p.key not in gang.lost]
            anchor = _domain(tree, trees, live)
            pending = tuple(placing.get(name, ()))
            # A Job with pods running grows where they run; one with none needs room for all it runs.
            need = len(pending) if anchor is not None else max(sizes.get(name, len(members)), len(pending))
            subgroups.append(SubGroup(name, pending, need, DOMAIN_RANK, policy=self.label, bound=len(live),
                                      anchor=anchor))
        return Asked(Requirement(key, "exclusive", subgroups=tuple(subgroups), labels=((DOMAIN_RANK, self.label),)),
                     "topology: the Job's running pods span {where}")

    def tree_key(self, snapshot: Snapshot) -> TreeKey | None:
        return tree_key(self.label)

    def facts(self) -> TopologyFacts:
        return TopologyFacts(NAME, (f"each Job alone in a domain of {self.label} where all its pods fit",), ())


def _domain(tree: TopologyTree, trees: TreeSource, live: list[Pod]) -> int | None:
    """The domain of the exclusive key the Job's running pods are in (the first one's: JobSet pins
    them to its leader's), None when none runs on a node the tree holds."""
    for p in live:
        n = trees.node_index.get(p.node_name or "")
        if n is not None and not tree.outside[n]:
            return tree.ancestor_at_most(int(tree.node_domain[n]), DOMAIN_RANK)
    return None


def _leader(pod: Pod) -> bool:
    """Whether the pod is its Job's leader, as JobSet's pod webhook tells it: completion index 0."""
    return pod.annotations.get(JOB_COMPLETION_INDEX) == "0"


def _completed(finished: Iterable[Pod]) -> dict[str, int]:
    """Per Job (its name), the completions its pods that Succeeded made: one per completion index (a
    pod of an index that succeeded twice completes it once)."""
    seen: dict[str, set[str]] = {}
    for p in finished:
        if p.phase == "Succeeded":
            seen.setdefault(job_name(p), set()).add(p.annotations.get(JOB_COMPLETION_INDEX, p.key))
    return {name: len(indexes) for name, indexes in seen.items()}


def jobset_gang(key: str, pods: list[Pod], snapshot: Snapshot, finished: Iterable[Pod] = ()) -> Gang:
    """The gang of one attempt of a JobSet (or of one replicatedJob of it) with its live members, its
    minimum what its Jobs still have to run (``finished``: its pods that finished)."""
    first = earliest(pods)
    found = _jobset_ref(first, snapshot.owners)
    owner = found[1] if found is not None else None
    replicated_job = key.split("/")[4] if key.count("/") == 4 else None
    jobs = [j for j in _replicated(owner).values()
            if replicated_job is None or owner is None or stage(owner, j.name) == replicated_job]
    # What each Job runs at once, less what it completed: a Job whose pods succeeded in part runs only
    # the rest (a retry of a failed one among them), one that completed runs nothing. A JobSet's
    # minimum is not its spec's once pods finished, or a retry would wait for pods that never come.
    done = _completed(finished)
    name = key.split("/")[2]
    left = {(j.name, f"{name}-{j.name}-{i}"): j.left(done.get(f"{name}-{j.name}-{i}", 0))
            for j in jobs for i in range(j.replicas)}
    # A Job without completions (a work queue) makes no pod once one of its pods succeeded: it asks no
    # more than the pods it has, or a sibling's retry would wait for pods that never come. (The
    # whole-Job room of an exclusive Job is still its size, ``whole``.)
    whole = dict(left)
    open_ended = {j.name for j in jobs if j.completions is None}
    succeeded = {job_name(p) for p in finished if p.phase == "Succeeded"}
    existing = Counter(job_name(p) for p in pods)
    left = {(rjob, job): min(n, existing[job]) if rjob in open_ended and job in succeeded else n
            for (rjob, job), n in left.items()}
    # Which replicatedJobs are placed exclusively, and over which label, is what their pods say (JobSet's
    # webhook acts on the pods' annotation, and so does the placement, ``ExclusiveAsk``), else, before
    # any pod of one exists, what the JobSet controller will write on them (``ReplicatedJob.exclusive``).
    said: dict[str, str] = {}
    for p in (*pods, *finished):
        rjob = p.labels.get(LABEL_REPLICATED_JOB, "")
        said[rjob] = said.get(rjob, "") or exclusive_key(p)
    label_of = {j.name: said.get(j.name, j.exclusive) for j in jobs}
    exclusive = {rjob for rjob, label in label_of.items() if label}
    # The pods its Jobs run at once. A Job placed exclusively: the whole Job while its leader and some of
    # its other pods are live and bound (JobSet's webhook makes the others only for a live, bound
    # leader: a Job that lost pods then falls below the minimum, stale, and its members are priced as
    # the gang's in preemption); else its leader and the other pods bound now (a new leader, after the
    # old one failed, is placed before any other pod of its Job can be made again: counting those
    # would never bind it; finished pods count nothing). A JobSet koordpy has not seen: every pod it
    # has now.
    leading = {job_name(p) for p in pods if p.node_name and _leader(p)}
    following = Counter(job_name(p) for p in pods if p.node_name and not _leader(p))

    def runs(rjob: str, job: str, n: int) -> int:
        if rjob not in exclusive or (job in leading and following[job]):
            return n
        return min(n, 1 + following[job])

    minimum = sum(runs(rjob, job, n) for (rjob, job), n in left.items()) if jobs else len(pods)
    config = GangConfig(key=key, min_member=max(1, minimum), total_number=max(1, minimum), from_crd=True)
    gang = Gang(key, config, pods, creation_time(owner.creation if owner is not None else first.creation))
    labels = sorted({k for p in pods if (k := exclusive_key(p))})
    if labels:
        # One label is honoured (the first): two replicatedJobs exclusive over different labels are
        # rare, and the other Jobs still follow the affinities JobSet's webhook gives their leaders.
        label = labels[0]
        by_job: dict[str, set[str]] = {}
        for p in pods:
            if exclusive_key(p) == label:
                by_job.setdefault(job_name(p), set()).add(p.key)
        # Every Job with pods still to run needs its part: a completed Job has no pod to place, and
        # counting it would hold the others forever (a restarted scheduler has no memory that the
        # gang met its minimum once to let them through).
        expected = sum(1 for (rjob, _), n in left.items() if n and label_of[rjob] == label) if jobs else len(by_job)
        gang.parts = (expected, tuple((frozenset(keys), 1) for _, keys in by_job.items()))
        if jobs:
            sizes = {job: n for (_, job), n in whole.items()}
        else:
            # A JobSet not in the cache (yet): each Job's own object says what it runs (its parallelism,
            # never more than its completions), so that a leader still goes where its whole Job fits.
            sizes = {}
            for p in pods:
                job = parent(p, snapshot.owners)
                if job is not None and job.replicas is not None:
                    sizes.setdefault(job_name(p), job.replicas)
        gang.asks = (ExclusiveAsk(label, tuple(sorted(sizes.items()))),)
    return gang


def _attempt_of(key: str) -> str:
    return key.split("/")[3].removeprefix("attempt-")


class JobSetDialect(GangsBase, ExplainsBase, TopologiesBase):
    """No object of its own declares a gang (the JobSet is an owner every dialect may read), no status is
    written (Events go to the gang's first pod), and its trees are those of the exclusive keys its pods
    name, built when a requirement asks for one (no topology object defines them: none is shown)."""

    name = NAME
    roles: tuple[Role, ...] = ("owner",)

    def member(self, pod: Pod, owners: dict[str, Owner] | None) -> str | None:
        # The label first: most pods are no JobSet's, and the owner chain is walked only for those that say so.
        if owners is None or LABEL_JOBSET not in pod.labels:
            return None
        found = _jobset_ref(pod, owners)
        if found is None:
            return None
        name, owner = found
        part = stage(owner, pod.labels.get(LABEL_REPLICATED_JOB, "")) if owner is not None and staged(owner) else None
        return gang_key(pod.namespace, name, _attempt(pod), part)

    def declared(self, snapshot: Snapshot) -> Iterable[str]:
        return ()

    def declares(self, key: str, snapshot: Snapshot) -> bool:
        return _KEY.fullmatch(key) is not None

    def gang(self, key: str, pods: list[Pod], snapshot: Snapshot) -> Gang | None:
        return jobset_gang(key, pods, snapshot) if pods else None

    def finishing_gang(self, key: str, pods: list[Pod], finished: Sequence[Pod], snapshot: Snapshot) -> Gang | None:
        return jobset_gang(key, pods, snapshot, finished) if pods else None

    def declared_by(self, key: str, snapshot: Snapshot) -> str | None:
        if not self.declares(key, snapshot):
            return None
        parts = key.split("/")
        part = ""
        if len(parts) == 5:
            # The replicatedJobs made at once with the one the key names are in its gang too (asked for
            # a message or explain only: the JobSet is looked for among the owners).
            owner = next((o for o in snapshot.owners.values() if (o.api_version, o.kind, o.namespace, o.name)
                          == (JOBSET_API_VERSION, KIND, parts[0], parts[2])), None)
            names = [j.name for j in owner.replicated_jobs if stage(owner, j.name) == parts[4]] if owner else []
            part = f" of replicatedJobs {', '.join(names)}" if len(names) > 1 else f" of replicatedJob {parts[4]}"
        # Its messages know a JobSet's gang by these words' beginning (``messages.JOBSET_PODS``).
        return f"{JOBSET_PODS}{parts[2]}'s pods{part} (restart attempt {_attempt_of(key)})"

    def group_terms(self, key: str, minimum: int | None, snapshot: Snapshot) -> GroupTerms | None:
        # A JobSet names no minimum: it is what its Jobs still run at once, or, with a Job placed
        # exclusively (its pods say so), what they need first (such a Job's leader). Asked by explain
        # only: its pods are looked for among all.
        if minimum is None:
            return None
        owners = snapshot.owners
        leaders = any(exclusive_key(p) for p in snapshot.pods
                      if not p.terminal and LABEL_JOBSET in p.labels and self.member(p, owners) == key)
        return GroupTerms("", f"minimum {jobset_minimum(minimum, leaders)}", minimum)

    def tree_keys(self, snapshot: Snapshot) -> Iterator[TreeKey]:
        return iter(())

    def tree(self, key: TreeKey, trees: TreeSource) -> TopologyTree | None:
        if key.dialect != NAME:
            return None
        # A node without the label is outside the tree: JobSet's affinities need it on the node.
        return label_levels_tree((key.name,), trees.nodes, "cluster")


DIALECT = JobSetDialect()

