"""Test hosts in network namespaces, each with its own sshd (and optionally its own dockerd).

(Filled in by the multi-node test rig; see scripts/rig/.)
"""
