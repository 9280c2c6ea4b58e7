"""Why the allocator says no, as values: ``Unallocatable`` (a node cannot give a pod's claims their
devices now; another node, or later, may) and ``DeviceError`` (the input is wrong in a way
kube-scheduler reports as an error: a CEL expression that fails at run time or exceeds its cost
limit, a claim asking for more devices than an allocation may hold, a constraint an "All" request
cannot meet, "All" devices of a pool being updated or invalid, a search past its time bound).

Belongs here: the reason kinds and the facts a message needs (the claim, the request, the pool,
the selector). Not here: words; ``koordpy.core.messages`` renders these, once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# What stopped the claim on this node:
# "class-missing"       a request names a DeviceClass that does not exist (detail: the class)
# "no-device-matches"   no device on the node passes the request's class and request selectors
# "taint-not-tolerated" matching devices exist but their NoSchedule/NoExecute taints are not tolerated
# "all-taken"           matching devices exist but too few are free (allocated, counters, capacity)
# "constraint-unmet"    each request could be met alone, not all of them together (matchAttribute,
#                       distinctAttribute, or requests competing for the same devices)
# "pool-incomplete"     a pool the request needs is being updated (fewer slices than it announces);
#                       for an "All" request, a DeviceError instead
# "pool-invalid"        a pool is invalid (duplicate device names, counters that do not add up); for
#                       an "All" request, a DeviceError instead
# "not-on-node"         a claim allocated already cannot be used on this node (its node selector)
# "binding-failed"      a claim allocated already has a device whose binding failed
# "binding-timeout"     a claim allocated already waited too long for its binding conditions
# "too-many-consumers"  a claim allocated already has as many consumers as reservedFor can hold
Why = Literal["class-missing", "no-device-matches", "taint-not-tolerated", "all-taken",
              "constraint-unmet", "pool-incomplete", "pool-invalid", "not-on-node", "binding-failed",
              "binding-timeout", "too-many-consumers"]


@dataclass(frozen=True, slots=True)
class Unallocatable:
    """A pod's claims cannot all get devices on one node. ``claim`` is "namespace/name" ("" when the
    reason is the node's as a whole), ``request`` the request ("req" or
    "req/sub", "" for the claim as a whole); ``detail`` the one fact the words need: the class of
    "class-missing", the pool ("driver/pool", and for "pool-invalid" ": why") of the pool reasons,
    "have/want" devices of "no-device-matches" (matching) and "all-taken" (free), the device of
    "binding-failed", the limit of "too-many-consumers"."""

    why: Why
    claim: str = ""
    request: str = ""
    detail: str = ""


class DeviceError(Exception):
    """Input the allocator cannot work with, as kube-scheduler reports it (an error status, not
    "unschedulable"): ``message`` says what to fix."""

    def __init__(self, message: str, claim: str = "", request: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.claim = claim
        self.request = request


@dataclass(frozen=True, slots=True)
class GangStopped:
    """A gang's device search (``koordpy.devices.gangsearch``) stopped before it could say whether an
    assignment exists: ``bound`` "time" (``seconds``, its budget) or "steps" (``steps``, its step
    count), after ``members`` members of a coupled group of ``group``."""

    bound: Literal["time", "steps"]
    seconds: float
    steps: int
    members: int
    group: int
