"""Reads as a client sees them: every name search and every AggregateSales shape of the cross
product, through Python's grpcio from a process of its own, against a server that `run` started
on a fresh copy of the data moments before.

One cold pass calls every shape once (its time is the cold figure); then CALLS calls per shape in
sequence, each shape's p50 / p99 / max, the p99 by nearest rank. Prints markdown tables and, with
--json, every figure. It measures; with --check it also fails when a shape's call failed or a
reply was over its bound (the CI's small run: every row produced, never a speed).

    client.py ADDRESS --stubs DIR [--calls N] [--only search|aggregates] [--match REGEX]
              [--json FILE] [--check]
"""
import argparse
import json
import math
import os
import re
import sys
import time

import grpc

# The goals of issue 56, printed beside the figures (never asserted).
GOAL_SEARCH_P99_MS = 5
GOAL_COUNT_P99_MS = 50
GOAL_AGGREGATE_P99_MS = 500
GOAL_AGGREGATE_COLD_MS = 1000
# Every reply of the server is bounded (ServerConfig): at most 4 MiB.
REPLY_BOUND = 4 * 1024 * 1024

# One letter to 200 characters, Latin with and without diacritics, upper and lower case, other
# scripts, an emoji, LIKE's own wildcards and a quote.
QUERIES = [
    "a", "e", "ö", "ñ", "Z", "ez", "jo", "NUÑ", "jos", "smi", "łęc", "ller", "jose", "josé",
    "MÜLLER", "ababab", "zzzzzzzz", "王", "Ωμέγα", "😀", "%", "_", "O'Ne",
    ("Jöse María Ñúñez-O'Brien 王 " * 8)[:200],
]
DEPARTMENT = "Engineering"
# None, a department, active only, both: the filters a name search takes.
FILTERS = [("none", {}), ("department", {"department": DEPARTMENT}), ("active", {"active": True}),
           ("department+active", {"department": DEPARTMENT, "active": True})]
FUNCTIONS = ["COUNT", "SUM", "AVG", "MIN", "MAX", "MEDIAN", "STDDEV"]
GROUPINGS = ["UNSPECIFIED", "DEPARTMENT", "EMPLOYEE", "YEAR", "MONTH", "DAY"]


def nearest_rank(sorted_ms, p):
    return sorted_ms[max(0, math.ceil(p / 100 * len(sorted_ms)) - 1)]


def sales_ranges(analytics, pb):
    """Every range of the cross product, from the years the sales cover: none, mid-month to
    mid-month across all but the ends, wider than the data, one year, a month from mid-month,
    one day."""
    years = analytics.AggregateSales(
        pb.AggregateSalesRequest(function=pb.AGGREGATE_FUNCTION_COUNT,
                                 group_by=pb.GROUP_BY_YEAR), timeout=600)
    keys = sorted(group.key for group in years.groups)
    first, last = int(keys[0]), int(keys[-1])
    middle = (first + last) // 2
    return [
        ("all", "", ""),
        ("mid-month span", f"{first + 1}-06-15", f"{last - 1}-02-03"),
        ("wider than the data", "1900-01-01", "2999-12-31"),
        ("one year", f"{middle}-01-01", f"{middle}-12-31"),
        ("a month from mid-month", f"{middle}-03-17", f"{middle}-04-16"),
        ("one day", f"{middle}-05-20", f"{middle}-05-20"),
    ]


def shapes(directory_pb, analytics_pb, analytics, only):
    """(group, label, stub method name, request) for every shape of the cross product."""
    result = []
    if only in (None, "search"):
        for query in QUERIES:
            for filter_name, fields in FILTERS:
                label = (f"{len(query)} characters, {filter_name}" if len(query) > 12
                         else f"{query!r} {filter_name}")
                result.append(("search", label, "ListEmployees", directory_pb.ListEmployeesRequest(
                    page_size=50, name_contains=query, order_by=directory_pb.EMPLOYEE_ORDER_NAME,
                    **fields)))
                result.append(("count", label, "CountEmployees",
                               directory_pb.CountEmployeesRequest(name_contains=query, **fields)))
    if only in (None, "aggregates"):
        for function in FUNCTIONS:
            for grouping in GROUPINGS:
                for range_name, start, end in sales_ranges(analytics, analytics_pb):
                    for department in ("", DEPARTMENT):
                        label = f"{function} by {grouping.lower()}, {range_name}" + (
                            f", {department}" if department else "")
                        result.append(("aggregate", label, "AggregateSales",
                                       analytics_pb.AggregateSalesRequest(
                                           function=getattr(analytics_pb,
                                                            f"AGGREGATE_FUNCTION_{function}"),
                                           group_by=getattr(analytics_pb, f"GROUP_BY_{grouping}"),
                                           department=department, from_date=start, to_date=end)))
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("address")
    parser.add_argument("--stubs", required=True)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--only", choices=["search", "aggregates"])
    parser.add_argument("--match", help="only the shapes whose label matches (a look, not a run of record)")
    parser.add_argument("--json")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--started", type=float, help="when the server was started (epoch s)")
    args = parser.parse_args()
    sys.path.insert(0, args.stubs)
    from roster.v1 import analytics_pb2, analytics_pb2_grpc, directory_pb2, directory_pb2_grpc

    # Without BDP probing: its pings count as strikes at the server (gRFC A8).
    channel = grpc.insecure_channel(args.address, options=[("grpc.http2.bdp_probe", 0)])
    stubs = {"ListEmployees": directory_pb2_grpc.DirectoryStub(channel).ListEmployees,
             "CountEmployees": directory_pb2_grpc.DirectoryStub(channel).CountEmployees,
             "AggregateSales": analytics_pb2_grpc.AnalyticsStub(channel).AggregateSales}
    # The first call after start is part of the measurement: the range query runs first.
    began = time.time()
    every = shapes(directory_pb2, analytics_pb2, analytics_pb2_grpc.AnalyticsStub(channel),
                   args.only)
    if args.match:
        every = [shape for shape in every if re.search(args.match, f"{shape[1]}")]
    failures = []

    def call(shape):
        group, label, method, request = shape
        at = time.perf_counter()
        try:
            reply = stubs[method](request, timeout=60)
        except grpc.RpcError as error:
            failures.append(f"{group} {label}: {error.code().name} {error.details()}")
            return None, 0, 0
        ms = (time.perf_counter() - at) * 1000
        size = reply.ByteSize()
        if size > REPLY_BOUND:
            failures.append(f"{group} {label}: a reply of {size} bytes")
        rows = (len(reply.employees) if method == "ListEmployees" else
                reply.count if method == "CountEmployees" else len(reply.groups))
        return ms, size, rows

    cold = [call(shape) for shape in every]
    cold_ended = time.time()
    results = []
    for shape, (cold_ms, size, rows) in zip(every, cold):
        shape_began = time.time()
        # In the order they were made, for the JSON: when a slow call came, not only how slow.
        in_order = [ms for ms, _, _ in (call(shape) for _ in range(args.calls)) if ms is not None]
        times = sorted(in_order)
        if not times or cold_ms is None:
            continue
        results.append({"group": shape[0], "shape": shape[1], "cold_ms": cold_ms,
                        "p50_ms": nearest_rank(times, 50), "p99_ms": nearest_rank(times, 99),
                        "max_ms": times[-1], "calls": len(times), "rows": rows, "bytes": size,
                        "began_s": shape_began - (args.started or began), "calls_ms": in_order})
    ended = time.time()

    goals = {"search": ("name search, first page of 50", GOAL_SEARCH_P99_MS),
             "count": ("CountEmployees", GOAL_COUNT_P99_MS),
             "aggregate": ("AggregateSales, first page", GOAL_AGGREGATE_P99_MS)}
    since = f"{began - args.started:.1f} s after the server started; " if args.started else ""
    print(f"{since}cold pass {cold_ended - began:.1f} s over {len(every)} shapes, then "
          f"{args.calls} calls per shape ({ended - cold_ended:.0f} s)\n")
    print("| calls | shapes | goal: p99 at most | worst p99 ms (shape) | shapes over | "
          "worst cold ms (shape) | most bytes |")
    print("| --- | ---: | ---: | --- | ---: | --- | ---: |")
    for group, (name, goal) in goals.items():
        rows = [r for r in results if r["group"] == group]
        if not rows:
            continue
        worst = max(rows, key=lambda r: r["p99_ms"])
        coldest = max(rows, key=lambda r: r["cold_ms"])
        over = sum(1 for r in rows if r["p99_ms"] > goal)
        print(f"| {name} | {len(rows)} | {goal} | {worst['p99_ms']:.1f} ({worst['shape']}) | "
              f"{over} | {coldest['cold_ms']:.1f} ({coldest['shape']}) | "
              f"{max(r['bytes'] for r in rows):,} |")
    print()
    for group, (name, goal) in goals.items():
        rows = sorted((r for r in results if r["group"] == group), key=lambda r: -r["p99_ms"])
        if not rows:
            continue
        print(f"{name}, every shape, slowest p99 first:\n")
        print("| shape | cold ms | p50 ms | p99 ms | max ms | rows | bytes |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in rows:
            print(f"| {r['shape']} | {r['cold_ms']:.1f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | "
                  f"{r['max_ms']:.2f} | {r['rows']:,} | {r['bytes']:,} |")
        print()
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"cold_pass_s": cold_ended - began, "calls_per_shape": args.calls,
                       "shapes": results, "failures": failures}, out, indent=1)
    for failure in failures:
        print(f"FAILED: {failure}", file=sys.stderr)
    if args.check:
        missing = len(every) - len(results)
        if failures or missing:
            raise SystemExit(f"{len(failures)} failed calls, {missing} shapes without a row")
        print(f"check: every one of {len(every)} shapes answered, each reply within its bound")


if __name__ == "__main__":
    main()
