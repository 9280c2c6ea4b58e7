"""Devices published through Dynamic Resource Allocation, and which of them a claim gets.

Belongs here: the pools a snapshot's ResourceSlices make (newest generation, complete or not, where
their devices can be used, their taints with the DeviceTaintRules'), the devices in use (claims'
allocations, the shells' in-flight ones), CEL selectors in the DRA environment (``cel``), and the
allocator that finds one node's allocation for a pod's claims with kube-scheduler v1.37's semantics,
the search of a gang's devices as a whole (``gangsearch``), and per node how many pods' plain claims
the free devices serve, counted on arrays (``counts``).
Everything here is pure: it takes records (``koordpy.api.dra``, nodes) and returns allocations or a
typed reason why not. Not here: parsing (``koordpy.api.dra``), how claims meet pods, gangs, nodes and
the cycle (the core's device seam), words (``koordpy.core.messages`` renders the reasons), writes.
"""
