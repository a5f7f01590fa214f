"""Test-rig fixtures: a real dockerd, the stub-engine image, the fake libnvidia-ml.so.1.

(Filled in by the runtime test rig; see scripts/rig/.)
"""
