"""Where one judgement's CPU goes inside Django: the item GET and the label POST of bench/review_load.py (htmx), run
in process through the Django test client (every middleware, the view, the template; no server, no network), on the
review_load scratch database. Prints the CPU ms per request of this process (the app's share; Postgres's is not in
it; the CPU of this process's Postgres backend is printed beside it), the queries per request, and with --profile
the functions that cost most (cProfile).

    ./run python bench/review_profile.py                      # 300 judgements, CPU ms and queries per request
    ./run python bench/review_profile.py --profile --top 40   # and where the time goes
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import re
import time

from _django import setup

ITEM = re.compile(rb'name="item" value="([^"]+)"')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=300, help="judgements (item GET + label POST each)")
    parser.add_argument("--profile", action="store_true", help="print cProfile's costliest functions")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--sort", default="tottime", help="cProfile sort key (tottime, cumulative)")
    args = parser.parse_args()
    base_db = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/pcapp").rsplit("/", 1)[1]
    setup(f"{base_db}_review_load")
    from django.db import connection
    from django.test import Client
    from review_load import prepare

    cid, cookies = prepare(1, args.n + 50, 1, f"profile-{time.time():.0f}")
    client = Client()
    for k, v in cookies[0].items():
        client.cookies[k] = v
    url = f"/review/campaigns/{cid}/"
    hx = {"HX-Request": "true"}
    post_headers = {**hx, "X-CSRFToken": cookies[0]["csrftoken"]}

    def judge() -> tuple[float, float]:
        t0 = time.process_time()
        body = client.get(url, headers=hx).content
        t1 = time.process_time()
        item = ITEM.search(body).group(1).decode()
        r = client.post(url + "label/", {"item": item, "verdict": "GOOD", "seconds": "2"}, headers=post_headers)
        assert r.status_code == 200, r.content[:300]
        return t1 - t0, time.process_time() - t1

    for _ in range(20):  # warm: templates compiled, connections open
        judge()
    q_get, q_post = [], []
    with connection.execute_wrapper(lambda execute, sql, *a: q_get.append(sql) or execute(sql, *a)):
        client.get(url, headers=hx)
    item = ITEM.search(client.get(url, headers=hx).content).group(1).decode()
    with connection.execute_wrapper(lambda execute, sql, *a: q_post.append(sql) or execute(sql, *a)):
        client.post(url + "label/", {"item": item, "verdict": "GOOD", "seconds": "2"}, headers=post_headers)
    import psutil

    with connection.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        backend = psutil.Process(cur.fetchone()[0])
    pg0 = sum(backend.cpu_times()[:2])
    profiler = cProfile.Profile(time.process_time) if args.profile else None  # CPU, not wall
    if profiler:
        profiler.enable()
    costs = [judge() for _ in range(args.n)]
    if profiler:
        profiler.disable()
    pg_ms = 1000 * (sum(backend.cpu_times()[:2]) - pg0) / args.n
    get_ms = 1000 * sum(c[0] for c in costs) / len(costs)
    post_ms = 1000 * sum(c[1] for c in costs) / len(costs)
    print(
        f"{args.n} judgements in process{' (under cProfile)' if profiler else ''}: item GET {get_ms:.2f} ms CPU, "
        f"label POST {post_ms:.2f} ms CPU; Postgres backend {pg_ms:.2f} ms CPU a judgement; "
        f"queries GET {len(q_get)}, POST {len(q_post)}"
    )
    print(f"load average {' '.join(open('/proc/loadavg').read().split()[:3])}")
    if os.environ.get("SHOW_SQL"):
        for name, q in (("GET", q_get), ("POST", q_post)):
            print(f"-- {name}")
            for sql in q:
                print("  ", " ".join(sql.split())[:220])
    if profiler:
        pstats.Stats(profiler).sort_stats(args.sort).print_stats(args.top)


if __name__ == "__main__":
    main()
