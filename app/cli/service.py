"""The service's commands: serve, worker, create-user, device."""

import argparse
import getpass
import signal
import sys
from types import FrameType

from app.cli.common import problem, read_settings, start_runtime
from app.runtime import Runtime


def add_commands(
    commands: "argparse._SubParsersAction[argparse.ArgumentParser]",
) -> None:
    """Each command's parser, with the function that runs it (`run`)."""
    serve = commands.add_parser("serve", help="start the API, the UI and the embedded worker")
    serve.set_defaults(run=run_serve)
    serve.add_argument("--host", default=None)
    serve.add_argument("--port", type=int, default=None)

    worker = commands.add_parser(
        "worker", help="run only the worker (no API), claiming queued jobs"
    )
    worker.set_defaults(run=run_worker)

    create_user = commands.add_parser("create-user", help="create a user (asks for the password)")
    create_user.set_defaults(run=run_create_user)
    create_user.add_argument("username")
    create_user.add_argument("--admin", action="store_true")
    create_user.add_argument("--password-stdin", action="store_true")

    device = commands.add_parser("device", help="the device, precision and memory training uses")
    device.set_defaults(run=run_device)
    device.add_argument("--json", action="store_true")
    device.add_argument("--benchmark", action="store_true", help="time training on each device")
    device.add_argument("--model", default=None, help="model to benchmark (default: the default)")


def run_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from app.api.connections import KEEP_ALIVE_SECONDS, ConnectionRules, guarded_protocol
    from app.main import create_app

    runtime = start_runtime()
    settings = runtime.settings

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            # Before uvicorn waits for open connections: the streams among them end now.
            runtime.begin_shutdown()
            super().handle_exit(sig, frame)

    rules = ConnectionRules(
        header_timeout_s=settings.header_timeout_seconds,
        body_timeout_s=settings.body_timeout_seconds,
        per_source=settings.max_connections_per_source,
        uncapped=settings.trusted_proxies,
        max_connections=settings.max_connections,
    )
    config = uvicorn.Config(
        create_app(settings, runtime=runtime),
        http=guarded_protocol(rules),
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        host=args.host or settings.host,
        port=args.port or settings.port,
        log_config=None,  # loguru already intercepts uvicorn's loggers
        timeout_graceful_shutdown=max(1, int(settings.shutdown_grace_seconds)),
        # uvicorn believes X-Forwarded-For from loopback by default: anyone on this host
        # could then sign in as any address (and dodge the per-address throttle).
        proxy_headers=bool(settings.trusted_proxies),
        forwarded_allow_ips=settings.trusted_proxies or None,
    )
    Server(config).run()
    return 0


def run_worker(args: argparse.Namespace) -> int:
    import threading

    runtime = start_runtime()
    stop = threading.Event()

    def begin_stop(*_: object) -> None:
        runtime.begin_shutdown()
        stop.set()

    signal.signal(signal.SIGTERM, begin_stop)
    signal.signal(signal.SIGINT, begin_stop)
    runtime.start_worker()
    try:
        stop.wait()
    finally:
        runtime.close()
    return 0


def run_create_user(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from app.schemas.users import UserCreate
    from app.services.accounts.users import create_user

    runtime = Runtime(read_settings())
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = getpass.getpass(f"Password for {args.username}: ")
    try:
        body = UserCreate(username=args.username, password=password, is_admin=args.admin)
    except ValidationError as exc:
        print(f"qatune: {'; '.join(problem(e) for e in exc.errors())}", file=sys.stderr)
        return 2
    try:
        with runtime.database.session() as session:
            user = create_user(
                session, username=body.username, password=body.password, is_admin=body.is_admin
            )
            print(f"created {'admin' if user.is_admin else 'user'} {user.username} (id {user.id})")
    finally:
        runtime.close()
    return 0


def run_device(args: argparse.Namespace) -> int:
    from app.schemas.system import DeviceReport

    runtime = start_runtime()
    if args.benchmark:
        from app.ml.device_benchmark import run_benchmark

        run_benchmark(
            runtime.settings.data_dir,
            caps=runtime.device_plan.capabilities,
            model=args.model or runtime.settings.default_base_model,
            model_cache_dir=runtime.storage.models_dir,
            offline=runtime.settings.offline,
        )
        runtime = start_runtime(logs=False)  # a new plan: the benchmark's winner counts now
    report = DeviceReport.of(runtime.device_plan)
    if args.json:
        print(report.model_dump_json(indent=2))
    else:
        print(f"device:    {report.device}")
        print(f"precision: {report.precision}")
        print(f"memory:    {report.memory_budget_gb} GB budget")
        for reason in report.reasons:
            print(f"  - {reason}")
    return 0
