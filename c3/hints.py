"""Hints in the cockpit's language: the backend's hints name CLI commands and flags (`c3 pod down chat`,
`--port`, `--force`); shown in the cockpit they become the key or field that does the same here.
What the cockpit cannot do (force a refused plan, trust a host key) stays a shell command, said so.
"""

from __future__ import annotations

import re

_NAME = r"([A-Za-z0-9][A-Za-z0-9._-]*)"

RULES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), replacement)
    for pattern, replacement in (
        (rf"`c3 pod down {_NAME}`", r"select pod \1 and press d"),
        (rf"`c3 pod rm {_NAME}`", r"select pod \1 and press x"),
        (rf"e\.g\. `c3 pod edit {_NAME} --port \d+`", r"change a field of pod \1's edit form (e)"),
        (rf"`c3 pod up {_NAME}`", r"select pod \1 and press u"),
        (r"`c3 pod create` makes one", "press N to create a pod"),
        (r"`c3 pod list` lists the pods", "the pod list (1) shows them"),
        (rf"`c3 node rm {_NAME}`", r"remove node \1 in Nodes (2, x)"),
        (r"`c3 node ls` lists the registered nodes", "Nodes (2) lists them"),
        (r"`c3 gpus --processes` lists the processes on the GPUs(?: now)?", "the process view (p) lists the processes on the GPUs now"),
        (r"`c3 gpus` lists this machine's GPUs", "the GPU panels show this machine's GPUs"),
        (r"`c3 gpus`", "the GPU panels"),
        (r"`c3 catalog` lists the slugs", "the New-pod slug list (N) shows them"),
        (r"`c3 recipes list`", "Recipes (3)"),
        (r"`c3 profile ls` lists profiles", "Recipes (3) shows the active profile"),
        (r"`c3 recipes launch ID --nodes a,b`", "u on a recipe in Recipes (3)"),
        (r"choose another --port, or leave it out for a free one", "change the Port field (the form proposes a free one)"),
        (r"choose one with --port N", "type one in the Port field"),
        (r"give this pod another port", "give this pod another port (its Port field)"),
        (r"a shorter --max-model-len", "a slug with a shorter context"),
        (r"the --file path", "the estate file's path"),
        (r"c3 node add NAME --host URL --ssh USER@HOST", "press a in Nodes (2)"),
        (r"register the node without --ssh-key", "leave the form's key field empty"),
        (r"--ssh-key", "the key field"),
        (r"e\.g\. --ssh ubuntu@spark-2", "e.g. ubuntu@spark-2 in the SSH field"),
        (r"(?:pass )?--force(?: plans it anyway| to plan it anyway| to boot without this check)?", "`c3 … --force` from a shell (the cockpit never forces)"),
        (rf"run `c3 node trust {_NAME}`", r"run `c3 node trust \1` in a shell"),
    )
)


def cockpit_hint(text: str | None) -> str | None:
    """The hint with CLI commands and flags said as the cockpit's keys and fields."""
    if not text:
        return text
    for pattern, replacement in RULES:
        text = pattern.sub(replacement, text)
    return text
