"""The cockpit's modes (Orchestration, Nodes, Recipes) and what they share."""
