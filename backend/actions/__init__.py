"""One class per write, shared by the CLI and the cockpit: `plan()`, `problems()`, `run(progress)`.

Adding a write is one `@register`ed class in its own module here (plus its test); `registry.build`
makes one from what the cockpit knows. This package imports nothing heavy at import time: the
cockpit reads `base` and `inputs` on its event loop.
"""

from backend.actions.base import Action, Outcome, Plan, Problem, Progress, ProgressSink, refuse_on
from backend.actions.inputs import NewNode, NewPod, RecipeLaunch

__all__ = ["Action", "NewNode", "NewPod", "Outcome", "Plan", "Problem", "Progress", "ProgressSink", "RecipeLaunch", "refuse_on"]
