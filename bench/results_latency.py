"""Results-page latency with 1,000,000 candidates in Postgres: the run's results page (first page, a score and
filter-reason filter, the unlabelled filter, a deep keyset page) and the candidates API, median and max over a few
requests each, through the Django test client. The suite checks only that the query count stays flat
(tests/mining/views/test_scale.py); the times are measured here.

    ./run bench results_latency.py            # builds the scratch database pcapp_bench_review once (as review_latency)
    ./run bench results_latency.py --n 100000

Target: every request under 10 s on this machine (in practice far less).
"""

from __future__ import annotations

import argparse
import statistics
import time

from _django import setup
from review_latency import fill

FILTERS = ({}, {"min_score": "1.5", "filter_reason": "none"}, {"label": "unlabelled"}, {"after": "500000"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    setup("pcapp_bench_review")
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.urls import reverse

    from mining.models import MiningRun

    fill(args.n)
    run = MiningRun.objects.get(name=f"bench-{args.n}")
    user, _ = get_user_model().objects.get_or_create(username="bench-staff", defaults={"is_staff": True})
    client = Client()
    client.force_login(user)
    targets = [(f"results {p or 'first page'}", reverse("run-results", args=[run.pk]), p) for p in FILTERS]
    targets.append(("API candidates", f"/api/runs/{run.pk}/candidates/", {}))
    print(f"{args.n} candidates; {args.repeat} requests each")
    for label, url, params in targets:
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            response = client.get(url, params)
            times.append(time.perf_counter() - t0)
            assert response.status_code == 200, (url, response.status_code)
        print(f"{label:<55} median {1000 * statistics.median(times):8.1f} ms   max {1000 * max(times):8.1f} ms")


if __name__ == "__main__":
    main()
