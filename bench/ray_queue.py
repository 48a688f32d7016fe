"""Jobs per hour through the queue: the Ray executor on a local two-node cluster beside
the local executor, the same jobs, in one run.

    python -m bench.ray_queue [--jobs 10] [--pairs 4] [--epochs 3]

Each side is one real `qatune serve` (SQLite) with `--jobs` jobs posted at once; the clock
runs from the first POST to the last job's end. The Ray side: a head that trains nothing
and two raylets with one qatune_slot each, on this same machine (so the two slots share
its cores: what the figure shows is the executor's overhead and its two-at-a-time queue,
not two machines' worth of compute). Per job: the wait in the queue, and the run's time.
"""

import argparse
import os
import statistics
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from ray.cluster_utils import Cluster

from app.ml.builtin import ensure_builtin_model
from tests.conftest import (
    Server,
    login_over_http,
    prepare_data_dir,
    qa_pairs,
    start_server,
    wait_for_status,
)


def through_queue(server: Server, jobs: int, pairs: int, epochs: int) -> dict[str, Any]:
    api = server.client(login_over_http(server))
    while api.get("/ready").status_code != 200:  # the Ray executor connects first
        time.sleep(0.3)
    body = {"qa_pairs": qa_pairs()[:pairs], "hyperparameters": {"epochs": epochs}}
    started = time.perf_counter()
    ids = [api.post("/jobs", json=body).json()["id"] for _ in range(jobs)]
    done = [wait_for_status(api, job_id, {"succeeded", "failed"}, timeout=1800) for job_id in ids]
    wall = time.perf_counter() - started
    assert all(job["status"] == "succeeded" for job in done), [j["error"] for j in done]

    def at(value: str) -> float:
        return datetime.fromisoformat(value).timestamp()

    return {
        "wall": wall,
        "per_hour": jobs / wall * 3600,
        "wait": statistics.median(at(j["started_at"]) - at(j["created_at"]) for j in done),
        "run": statistics.median(at(j["finished_at"]) - at(j["started_at"]) for j in done),
    }


def serve(root: Path, models: Path, name: str, **env: str) -> Server:
    return start_server(root / name, models, **env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10)
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        models = root / "models"
        ensure_builtin_model(models)

        local = serve(root, models, "local")
        try:
            results["local executor (1 slot)"] = through_queue(
                local, args.jobs, args.pairs, args.epochs
            )
        finally:
            local.stop()

        node_data = root / "node"
        prepare_data_dir(node_data, models)
        os.environ.update(QATUNE_DATA_DIR=str(node_data), QATUNE_OFFLINE="true")
        cluster = Cluster(
            initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False}
        )
        for _ in range(2):
            cluster.add_node(num_cpus=1, resources={"qatune_slot": 1})
        ray_server = serve(
            root, models, "ray", QATUNE_EXECUTOR="ray", QATUNE_RAY_ADDRESS=cluster.address
        )
        try:
            results["Ray executor (2 nodes x 1 slot)"] = through_queue(
                ray_server, args.jobs, args.pairs, args.epochs
            )
        finally:
            ray_server.stop()
            cluster.shutdown()

    print(f"\n{args.jobs} jobs of {args.pairs} pairs x {args.epochs} epochs, posted at once\n")
    print("| executor | wall s | jobs/hour | median queue wait s | median run s |")
    print("|---|---:|---:|---:|---:|")
    for name, r in results.items():
        print(
            f"| {name} | {r['wall']:.1f} | {r['per_hour']:,.0f} | {r['wait']:.1f} | "
            f"{r['run']:.1f} |"
        )
    base, ray_side = results.values()
    print(f"\nRay / local jobs per hour: {ray_side['per_hour'] / base['per_hour']:.2f}x")


if __name__ == "__main__":
    main()
