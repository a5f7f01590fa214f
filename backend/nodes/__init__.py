"""Machines c3 drives: the node registry (`nodes.json`) and local-node detection."""
