#!/usr/bin/env python3
"""Checks that the grpc-go and C++ peers answer GetEmployee, ListEmployees, StreamEmployees and
Health.Check like Roster.

    python3 Benchmarks/peers/verify.py      # from the Roster project root, after build.sh

For 226 guids (the first 25, 200 at random, the middle row), each peer's Employee must
serialize to the same bytes as Roster's (deterministic serialization); an upper-case guid, an
unknown one, a malformed one and an empty one must end with the same status code; the first
three pages of 50 of the default ListEmployees listing (each page_token from the page before),
the first two pages of 50 without thumbnails (a read mask of every other field), a page of 7, a page of the default size and a page after a bad token must give the same bytes
or status; StreamEmployees must stream the whole listing in pages of 50, and its first three
pages of 7, with the same bytes; and Health.Check must give the same answer. Exits 1 on any
difference.
"""
import sqlite3, sys

from servers import DB, LABEL, NO_THUMBNAIL_MASK, Server, stop_on_sigterm

import grpc  # noqa: E402
from google.protobuf import json_format  # noqa: E402
from roster.v1 import directory_pb2, directory_pb2_grpc  # noqa: E402
from grpc_health.v1 import health_pb2, health_pb2_grpc  # noqa: E402


def probes():
    con = sqlite3.connect(f"file:{DB}?mode=ro", uri=True)
    try:
        n = con.execute("SELECT count(*) FROM employees").fetchone()[0]
        guids = [r[0] for r in con.execute(
            "SELECT guid FROM employees WHERE id IN (SELECT id FROM employees ORDER BY id LIMIT 25) "
            "OR id IN (SELECT id FROM employees ORDER BY random() LIMIT 200)")]
        guids.append(con.execute("SELECT guid FROM employees ORDER BY id LIMIT 1 OFFSET ?", (n // 2,)).fetchone()[0])
    finally:
        con.close()
    return guids, guids + [guids[0].upper(), "00000000-0000-4000-8000-000000000000", "not-a-uuid", ""]


def answers(name, probe_list):
    out = {}
    with Server(name) as srv:
        ch = grpc.insecure_channel(srv.target)
        try:
            d = directory_pb2_grpc.DirectoryStub(ch)
            h = health_pb2_grpc.HealthStub(ch)
            for g in probe_list:
                try:
                    e = d.GetEmployee(directory_pb2.GetEmployeeRequest(guid=g), timeout=10)
                    out[g] = ("OK", e.SerializeToString(deterministic=True), e)
                except grpc.RpcError as err:
                    out[g] = (err.code().name, b"", None)
            r = h.Check(health_pb2.HealthCheckRequest(), timeout=10)
            out["health"] = ("OK", r.SerializeToString(), r)
            token = ""
            requests = []
            for page in range(3):
                try:
                    resp = d.ListEmployees(directory_pb2.ListEmployeesRequest(page_size=50, page_token=token), timeout=10)
                    out[f"list page {page + 1}"] = ("OK", resp.SerializeToString(deterministic=True), resp)
                    token = resp.next_page_token
                except grpc.RpcError as err:
                    out[f"list page {page + 1}"] = (err.code().name, b"", None)
            # The listing without thumbnails (a read mask of every other field), two pages by token.
            token = ""
            for page in range(2):
                try:
                    request = directory_pb2.ListEmployeesRequest(page_size=50, page_token=token)
                    request.read_mask.paths.extend(NO_THUMBNAIL_MASK)
                    resp = d.ListEmployees(request, timeout=10)
                    out[f"list without thumbnails, page {page + 1}"] = ("OK", resp.SerializeToString(deterministic=True), resp)
                    token = resp.next_page_token
                except grpc.RpcError as err:
                    out[f"list without thumbnails, page {page + 1}"] = (err.code().name, b"", None)
            for label, request in (("list of 7", directory_pb2.ListEmployeesRequest(page_size=7)),
                                   ("list of the default size", directory_pb2.ListEmployeesRequest()),
                                   ("list after a bad token", directory_pb2.ListEmployeesRequest(page_token="bm9wZQ"))):
                try:
                    resp = d.ListEmployees(request, timeout=10)
                    out[label] = ("OK", resp.SerializeToString(deterministic=True), resp)
                except grpc.RpcError as err:
                    out[label] = (err.code().name, b"", None)
            # The whole listing streamed, pages of 50, and the first 3 pages of 7: every page's
            # bytes, in order, and the status the stream ends with.
            for label, request, limit in (("stream of 50s", directory_pb2.ListEmployeesRequest(page_size=50), None),
                                          ("stream of 7s", directory_pb2.ListEmployeesRequest(page_size=7), 3)):
                pages = []
                try:
                    for page in d.StreamEmployees(request, timeout=120):
                        pages.append(page.SerializeToString(deterministic=True))
                        if limit and len(pages) == limit:
                            break
                    out[label] = ("OK", b"".join(len(p).to_bytes(4, "big") + p for p in pages), None)
                except grpc.RpcError as err:
                    out[label] = (err.code().name, b"", None)
        finally:
            ch.close()
    return out


def main():
    stop_on_sigterm()
    guids, probe_list = probes()
    ref = answers("roster", probe_list)
    sample = ref[guids[-1]][2]
    if sample is None:
        sys.exit(f"verify: Roster did not answer GetEmployee for {guids[-1]} ({ref[guids[-1]][0]})")
    fields = sorted(f.name for f, _ in sample.ListFields())
    print(f"verify: Roster's GetEmployee for {guids[-1]} has {len(fields)} fields: {', '.join(fields)}")
    codes = sorted({ref[g][0] for g in ref})
    failed = 0
    for name in ("go", "cpp"):
        got = answers(name, probe_list)
        bad = [g for g in ref if ref[g][:2] != got[g][:2]]
        print(f"verify: {LABEL[name]}: {len(ref) - len(bad)}/{len(ref)} answers identical to Roster's "
              f"(status codes seen: {', '.join(codes)})")
        for g in bad[:5]:
            print("  differs:", repr(g), ref[g][0], got[g][0])
            if ref[g][2] is not None and got[g][2] is not None:
                print("   roster:", json_format.MessageToDict(ref[g][2]))
                print("   peer:  ", json_format.MessageToDict(got[g][2]))
        failed += len(bad)
    print("verify:", "all identical" if failed == 0 else f"{failed} differences")
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("verify: interrupted; servers stopped", file=sys.stderr)
        sys.exit(130)
    except RuntimeError as err:  # a server that would not start
        print(f"verify: {err}", file=sys.stderr)
        sys.exit(1)
