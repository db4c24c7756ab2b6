#!/usr/bin/env python3
"""Does a server's RSS keep growing under repeated load, or level off?

    python3 Benchmarks/peers/memprobe.py roster [batches]    # also: go, cpp (default 5 batches)
    python3 Benchmarks/peers/memprobe.py roster percall      # per call or per connection?

Run from the Roster project root after `Benchmarks/peers/run` has built the peers and the
database. Starts the server, then runs `batches` pairs of h2load 16x16 (40,000 GetEmployee,
then 40,000 Health.Check), printing VmRSS / RssAnon / VmHWM after startup and after each batch.
"""
import sys, time

from bench import GET, HC, Quiet, h2load, middle_guid, prepare_bodies
from servers import LABEL, Server, stop_on_sigterm


def main():
    name = sys.argv[1] if len(sys.argv) > 1 else "roster"
    mode = sys.argv[2] if len(sys.argv) > 2 else "5"
    if name not in LABEL or not (mode == "percall" or mode.isdigit()):
        sys.exit(__doc__)
    stop_on_sigterm()
    files = prepare_bodies(middle_guid()[1])
    Quiet().wait(f"starting {name}")
    with Server(name) as srv:
        time.sleep(2)

        def show(label):
            m = srv.memory()
            print(f"{name:6} {label:18} VmRSS {m['VmRSS'] / 1024:6.1f} MiB  RssAnon {m['RssAnon'] / 1024:6.1f}  "
                  f"VmHWM {m['VmHWM'] / 1024:6.1f}  threads {m['Threads']}", flush=True)

        def rss():
            return srv.memory()["RssAnon"] / 1024

        show("after startup")
        if mode == "percall":
            a = rss()
            h2load(srv.target, HC, files[HC], 1, 16, 80000)
            b = rss()
            print(f"1 connection x 16 streams, 80,000 Health.Check: +{b - a:.1f} MiB ({(b - a) * 1048576 / 80000:.0f} B/call)")
            for _ in range(50):
                h2load(srv.target, HC, files[HC], 16, 1, 160)
            c = rss()
            print(f"800 connections x 10 Health.Check (8,000 calls): +{c - b:.1f} MiB "
                  f"({(c - b) * 1024 / 800:.1f} KiB/connection)")
            h2load(srv.target, GET, files[GET], 1, 16, 80000)
            d = rss()
            print(f"1 connection x 16 streams, 80,000 GetEmployee: +{d - c:.1f} MiB ({(d - c) * 1048576 / 80000:.0f} B/call)")
            return 0
        for b in range(1, int(mode) + 1):
            h2load(srv.target, GET, files[GET], 16, 16, 40000)
            h2load(srv.target, HC, files[HC], 16, 16, 40000)
            show(f"after {b * 80000:,} calls")
        time.sleep(10)
        show("10 s idle")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("memprobe: interrupted; server stopped", file=sys.stderr)
        sys.exit(130)
