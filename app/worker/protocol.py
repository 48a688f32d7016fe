"""What a training run sends its supervisor: events while it trains, then how it ended.

The local executor carries these over a pipe from its child process, the Ray executor
through a channel actor; everything here pickles.
"""

from app.jobs.outcomes import Reported
from app.ml.events import TrainingEvent

ChildMessage = TrainingEvent | Reported
