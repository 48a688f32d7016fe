"""What the sign-in proof of work costs: the admin UI's JavaScript in Chromium against
Python's hashlib (what a script or a guesser's native code pays at least), side by side.

    python -m bench.proof_of_work --rounds 9

For each price (16, 18 and 20 bits) it solves `--rounds` fresh challenges both ways,
checks that both find the same counter, and prints the median and worst seconds and the
hash rates; the count of tries is geometric, so a few rounds vary widely.
"""

import argparse
import functools
import http.server
import statistics
import threading
import time

from app.core.proof_of_work import Proofs, solve
from tests.conftest import ROOT
from tests.ui.conftest import CHROMIUM, FLAGS

SOLVE_IN_PAGE = """async ([challenge, bits]) => {
  const { solve } = await import("/js/proof_of_work.js");
  const started = performance.now();
  const counter = await solve(challenge, bits);
  return [counter, (performance.now() - started) / 1000];
}"""


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    proofs = Proofs("bench" * 8)
    handler = functools.partial(Quiet, directory=str(ROOT / "app" / "web"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{server.server_address[1]}/index.html")
        print("bits  python median/worst s  chromium median/worst s  M hashes/s py / js")
        for bits in (16, 18, 20):
            python, chromium, tries = [], [], 0
            for _ in range(args.rounds):
                challenge = proofs.issue("admin", bits)
                started = time.perf_counter()
                counter = solve(challenge, bits)
                python.append(time.perf_counter() - started)
                found, seconds = page.evaluate(SOLVE_IN_PAGE, [challenge, bits])
                assert found == counter, (found, counter)
                chromium.append(seconds)
                tries += int(counter) + 1
            rate_py, rate_js = tries / sum(python) / 1e6, tries / sum(chromium) / 1e6
            print(
                f"{bits:4}  {statistics.median(python):8.2f} / {max(python):5.2f}"
                f"  {statistics.median(chromium):14.2f} / {max(chromium):5.2f}"
                f"  {rate_py:10.2f} / {rate_js:.2f}"
            )
        browser.close()
    server.shutdown()


if __name__ == "__main__":
    main()
