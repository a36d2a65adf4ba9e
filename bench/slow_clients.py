"""Slow and oversized clients against each server stack: does one anonymous client stall everyone, or make the server
read a huge body? For each stack (pcapp/serve.py) it starts the server, then:

1. opens `--idle` connections that send half a request header and then one more header line every few seconds,
   never finishing (slowloris), and meanwhile fetches the login page once a second as a normal client: how many of
   those fetches were answered, and how fast;
2. sends the headers of an anonymous POST with a 300 MB body (Content-Length) to the login page and to the upload
   page, and no body: how long until the server answers, and with what (a server that reads the body first never
   answers here, since the body never comes);
3. holds `--idle` anonymous POSTs whose body trickles in a byte every 2 s, with the normal client as in 1.

    ./run bench slow_clients.py                        # every stack, 300 idle connections, 20 s
    ./run bench slow_clients.py --stacks proxy --idle 2000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

from _django import setup
from review_load import free_port, machine, pct, start_server, stop_server


async def slowloris(port: int, n: int, until: float) -> int:
    """Hold n half-sent requests open until `until`; returns how many the server had closed by then."""
    closed = 0

    async def one(i: int) -> None:
        nonlocal closed
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(f"GET /accounts/login/?slow={i} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode())
            await writer.drain()
            while time.monotonic() < until:
                await asyncio.sleep(3)
                writer.write(f"X-Slow-{int(time.monotonic())}: {i}\r\n".encode())
                await writer.drain()
            writer.close()
        except (OSError, ConnectionError):
            closed += 1

    await asyncio.gather(*(one(i) for i in range(n)))
    return closed


async def slow_bodies(port: int, n: int, until: float) -> None:
    """Hold n anonymous POSTs to the login page open until `until`: whole headers, a 10,000-byte body announced, and
    one byte of it every 2 s (R-U-Dead-Yet). A server that hands such a request to an app thread before its body
    has arrived loses that thread for as long as the client likes."""

    async def one() -> None:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            head = "POST /accounts/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            writer.write(
                f"{head}Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 10000\r\n\r\n".encode()
            )
            await writer.drain()
            while time.monotonic() < until:
                await asyncio.sleep(2)
                writer.write(b"a")
                await writer.drain()
            writer.close()
        except (OSError, ConnectionError):
            pass

    await asyncio.gather(*(one() for _ in range(n)))


async def fetch(port: int, timeout: float) -> float | None:
    """One normal GET of the login page: seconds to the full answer, None when it failed or timed out."""
    t0 = time.monotonic()
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
        writer.write(b"GET /accounts/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), timeout - (time.monotonic() - t0))
        writer.close()
    except (OSError, TimeoutError, ConnectionError):
        return None
    return time.monotonic() - t0 if data.startswith(b"HTTP/1.1 200") else None


async def oversized(port: int, path: str, size: int, timeout: float) -> tuple[str, float]:
    """Headers of an anonymous POST of `size` bytes, no body: (the status line, or 'no answer', and seconds)."""
    t0 = time.monotonic()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        writer.write(f"{head}Content-Length: {size}\r\n\r\n".encode())
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), timeout)
        writer.close()
    except TimeoutError:
        return "no answer", time.monotonic() - t0
    except (OSError, ConnectionError) as exc:
        return type(exc).__name__, time.monotonic() - t0
    return (line.decode(errors="replace").strip() or "closed"), time.monotonic() - t0


async def attack(port: int, idle: int, seconds: float) -> None:
    until = time.monotonic() + seconds
    hold = asyncio.create_task(slowloris(port, idle, until))
    await asyncio.sleep(2)  # let the idle connections pile up first
    answers: list[float | None] = []
    while time.monotonic() < until - 1:
        answers.append(await fetch(port, 10))
        await asyncio.sleep(1)
    closed = await hold
    ok = [a * 1000 for a in answers if a is not None]
    worst = max(ok, default=float("nan"))
    print(f"  {idle} slowloris connections ({closed} closed by the server): normal client answered {len(ok)}/"
          f"{len(answers)}, p50 {pct(ok, 0.5):.0f} ms, max {worst:.0f} ms")  # fmt: skip
    for path in ("/accounts/login/", "/imports/new/"):
        status, took = await oversized(port, path, 300 * 1024**2, 10)
        print(f"  anonymous POST {path}, Content-Length 300 MB, no body sent: '{status}' after {took * 1000:.0f} ms")
    until = time.monotonic() + seconds
    hold = asyncio.create_task(slow_bodies(port, idle, until))
    await asyncio.sleep(2)
    answers = []
    while time.monotonic() < until - 1:
        answers.append(await fetch(port, 10))
        await asyncio.sleep(1)
    await hold
    ok = [a * 1000 for a in answers if a is not None]
    print(f"  {idle} slow-body POSTs (1 byte / 2 s): normal client answered {len(ok)}/{len(answers)}, "
          f"p50 {pct(ok, 0.5):.0f} ms, max {max(ok, default=float('nan')):.0f} ms")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stacks", default="waitress,gunicorn,granian,proxy")
    parser.add_argument("--idle", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=20)
    args = parser.parse_args()
    base_db = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/pcapp").rsplit("/", 1)[1]
    setup(f"{base_db}_review_load")
    from pcapp.serve import default_size

    print(machine())
    for name in args.stacks.split(","):
        port = free_port()
        procs = start_server(name, port, default_size())
        print(f"{name} ({default_size()[0]} processes x {default_size()[1]} threads):")
        try:
            asyncio.run(attack(port, args.idle, args.seconds))
        finally:
            stop_server(procs)


if __name__ == "__main__":
    main()
