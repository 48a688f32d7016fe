"""`qatune`: serve, worker, create-user, device (service.py); train, ask, export,
export-base, fetch-llama-cpp (models.py); backup, restore (backups.py).

Every command builds the same `Runtime` the service does (settings, torch environment,
device plan, database when it needs one); settings or hardware that cannot work stop it
with one line on stderr and exit code 2, a request the service refuses (qatune's own
errors) with its message and exit code 1.
"""

import argparse
import sys

from app.cli import backups, models, service
from app.cli.common import StartupError
from app.core.errors import QatuneError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="qatune", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    for module in (service, models, backups):
        module.add_commands(commands)
    args = parser.parse_args(argv)
    try:
        exit_code: int = args.run(args)  # set by the command's parser (add_commands)
        return exit_code
    except StartupError as exc:
        print(f"qatune: {exc}", file=sys.stderr)
        return 2
    except QatuneError as exc:
        print(f"qatune: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
