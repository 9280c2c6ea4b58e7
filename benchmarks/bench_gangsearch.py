"""What the gang-wide device search costs (issue 31); prints figures, asserts nothing about time.

    .venv/bin/python -m benchmarks.bench_gangsearch [--repeat 5] [--members 100 1000]

The shape of kubernetes/kubernetes#138765: nodes of one partitionable GPU, published whole and as two
halves over one counter of 2, two members per node, each member's claim asking ``firstAvailable``
[whole, half]. Member by member (kube-scheduler's order) the first member of a node takes the whole
GPU and the second finds nothing; the search (``koordpy.devices.gangsearch.search``) gives each a half.
Per gang size: member by member until it fails, the search, and, as the reference in the same run,
member by member on the control shape (the template asking [half, whole]: halves first, which
succeeds, one allocation per member). Then one node of 8 such GPUs and 16 members (all coupled: one
group of 16), the search's hardest case measured in ``docs/design.md``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from koordpy.api.dra import DeviceClass, Devices, ResourceClaim, ResourceSlice
from koordpy.api.objects import Node
from koordpy.devices import gangsearch
from koordpy.devices.allocator import Allocator
from koordpy.devices.gangsearch import Member
from koordpy.devices.pools import Pools
from koordpy.devices.reasons import Unallocatable
from koordpy.devices.state import InUse

DRIVER = "gpu.example.com"
NOW = 1000.0


def node(name: str) -> Node:
    return Node.from_raw({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}},
                          "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}}})


def slices(name: str, gpus: int) -> list[ResourceSlice]:
    """The node's GPUs, each whole and halved over its own counter set, in one pool of two slices."""
    devices: list[dict[str, Any]] = []
    counters = []
    for g in range(gpus):
        counters.append({"name": f"gpu-{g}", "counters": {"mem": {"value": "2"}}})
        for part, size, used in ((f"gpu-{g}", "whole", "2"), (f"gpu-{g}-a", "half", "1"), (f"gpu-{g}-b", "half", "1")):
            devices.append({"name": part, "attributes": {"size": {"string": size}},
                            "consumesCounters": [{"counterSet": f"gpu-{g}", "counters": {"mem": {"value": used}}}]})
    pool = {"name": name, "generation": 1, "resourceSliceCount": 2}
    return [ResourceSlice.from_raw({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                                    "metadata": {"name": f"{name}-{part}"},
                                    "spec": {"driver": DRIVER, "nodeName": name, "pool": pool, **body}})
            for part, body in (("devices", {"devices": devices}), ("counters", {"sharedCounters": counters}))]


def claim(name: str, order: tuple[str, ...]) -> ResourceClaim:
    subs = [{"name": size, "deviceClassName": DRIVER,
             "selectors": [{"cel": {"expression": f'device.attributes["{DRIVER}"].size == "{size}"'}}]}
            for size in order]
    return ResourceClaim.from_raw({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                   "metadata": {"name": name, "namespace": "default"},
                                   "spec": {"devices": {"requests": [{"name": "gpu", "firstAvailable": subs}]}}})


def world(members: int, per_node: int, gpus: int, order: tuple[str, ...]) -> tuple[Allocator, list[Member]]:
    cls = DeviceClass.from_raw({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DRIVER},
                                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    nodes = [node(f"node-{i}") for i in range((members + per_node - 1) // per_node)]
    made = [s for n in nodes for s in slices(n.name, gpus)]
    devices = Devices(classes={DRIVER: cls}, slices={s.name: s for s in made}, taint_rules={})
    allocator = Allocator(Pools.build(devices), devices.classes, InUse())
    out = []
    for m in range(members):
        c = claim(f"m{m}", order)
        out.append(Member(nodes[m // per_node], (c,), (c.key,)))
    return allocator, out


def member_by_member(allocator: Allocator, members: list[Member]) -> int:
    """kube-scheduler's order: each member allocated on its node after the ones before it; how many
    got their devices before one did not (the devices in use put back)."""
    undo: list[Callable[[], None]] = []
    try:
        for k, m in enumerate(members):
            got = allocator.allocate(m.node, m.claims, NOW)
            if isinstance(got, Unallocatable):
                return k
            undo.extend(allocator.in_use.add(a) for a in got)
        return len(members)
    finally:
        for u in reversed(undo):
            u()


def timed(run: Callable[[], Any], repeat: int) -> tuple[list[float], Any]:
    times, last = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        last = run()
        times.append(time.perf_counter() - t0)
    return times, last


def say(label: str, times: list[float], extra: str) -> None:
    print(f"  {label}: best {min(times) * 1000:.1f} ms, median {statistics.median(times) * 1000:.1f} ms  {extra}",
          flush=True)


def gang(n: int, repeat: int) -> None:
    print(f"== #138765 shape, {n} members on {n // 2} nodes of one partitionable GPU", flush=True)
    allocator, members = world(n, 2, 1, ("whole", "half"))
    times, got = timed(lambda: member_by_member(allocator, members), repeat)
    say("member by member, whole first (kube-scheduler)", times, f"[fails at member {got + 1} of {n}]")
    times, found = timed(lambda: gangsearch.search(allocator, members, NOW), repeat)
    say("the gang-wide search", times, f"[{'every member placed' if found.made is not None else 'none found'}, "
        f"{found.steps:,} steps, {len(found.groups)} groups]")
    control, halves = world(n, 2, 1, ("half", "whole"))
    times, got = timed(lambda: member_by_member(control, halves), repeat)
    say("reference: member by member, half first", times, f"[{got} of {n} placed]")


def one_node(repeat: int) -> None:
    print("== one node of 8 partitionable GPUs, 16 members (one coupled group)", flush=True)
    allocator, members = world(16, 16, 8, ("whole", "half"))
    times, got = timed(lambda: member_by_member(allocator, members), repeat)
    say("member by member, whole first", times, f"[fails at member {got + 1} of 16]")
    times, found = timed(lambda: gangsearch.search(allocator, members, NOW), repeat)
    say("the gang-wide search", times, f"[{'every member placed' if found.made is not None else 'none found'}, "
        f"{found.steps:,} steps]")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--members", type=int, nargs="+", default=[100, 1000])
    args = ap.parse_args()
    for n in args.members:
        gang(n, args.repeat)
    one_node(args.repeat)


if __name__ == "__main__":
    main()
