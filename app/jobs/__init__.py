"""The job domain, below services, the database and the API's schemas: a job's statuses
and the one table of moves between them (status.py), how a run ends and what that makes
of the job (outcomes.py), what a run is given (spec.py), and the limits on what a job
trains on (limits.py). It imports nothing above it."""
