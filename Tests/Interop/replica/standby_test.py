#!/usr/bin/env python3
"""Reads from hot standbys (`--postgres-read`), with read-your-writes through change tokens.

One Roster on the primary with two read addresses: the cluster's streaming standby, and a
port where nothing listens. With the standby's replay paused (`pg_wal_replay_pause()`), a
write's reply carries its change token (`x-roster-change-token`, on gRPC unary and
client-streaming replies and on the Connect protocol's); a read without it is served by the
standby, as it was before the write; the same read naming the token sees the write (served
by the primary once no standby has replayed it in time); WatchChanges stays on the primary.
Once replay resumes, a read naming the token is served by the standby. A malformed token is
INVALID_ARGUMENT naming the entry. Once the paused standby is further behind than
--postgres-read-max-lag, the primary serves every read; stopped, likewise, none failing; started
again, it serves again. `/metrics` shows each standby's lag,
the dead address as down, and the reads each way.

Usage: ROSTER_POSTGRES_STANDBY=async|sync scripts/postgres run -- \
         python3 Tests/Interop/replica/standby_test.py ROSTER_BINARY
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

import grpc

ROSTER = os.path.abspath(sys.argv[1])
PRIMARY = os.environ["ROSTER_TEST_POSTGRES_URL"]
STANDBY = os.environ["ROSTER_TEST_POSTGRES_STANDBY_URL"]
WORK = tempfile.mkdtemp(prefix="roster-standby-")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import rosterstubs  # noqa: E402
import servers  # noqa: E402

STUBS = rosterstubs.generate(WORK, ["types.proto", "directory.proto", "analytics.proto", "pictures.proto"])
from google.protobuf import field_mask_pb2  # noqa: E402
from roster.v1 import (analytics_pb2, analytics_pb2_grpc, directory_pb2, directory_pb2_grpc,  # noqa: E402
                       pictures_pb2, pictures_pb2_grpc, types_pb2)

KEY = "x-roster-change-token"
EMPLOYEES = 40
MAX_LAG = 3
processes = []


def psql(url, sql):
    return subprocess.run(["psql", url, "-tAc", sql], check=True, capture_output=True,
                          text=True).stdout.split()


def samples(url):
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    return dict(line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))


def metric(scraped, name, standby=None):
    key = name if standby is None else f'{name}{{standby="{standby}"}}'
    # A counter not yet counted is not on the page.
    return float(scraped.get(key, "0" if name.endswith("_total") else "nan"))


def until(what, check, seconds=30):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for {what}; logs in {WORK}")


def main():
    schema = "standby_" + str(os.getpid())
    port, dead = servers.free_port(), servers.free_port()
    standby_name = STANDBY.split("@")[1].split("/")[0]
    dead_name = f"127.0.0.1:{dead}"
    log = open(os.path.join(WORK, "roster.log"), "w")
    process = subprocess.Popen(
        [ROSTER, "serve", "--port", str(port), "--postgres", PRIMARY, "--postgres-schema", schema,
         "--postgres-read", STANDBY, "--postgres-read", f"postgres://roster@{dead_name}/roster",
         "--postgres-read-max-lag", str(MAX_LAG),
         "--seed-employees", str(EMPLOYEES), "--no-seed-pictures", "--no-log-requests",
         "--metrics-port", "0"],
        stdout=subprocess.PIPE, stderr=log, text=True)
    processes.append(process)
    lines = [process.stdout.readline(), process.stdout.readline()]
    if not any(line.startswith("listening on ") for line in lines):
        raise SystemExit("roster did not start; see " + WORK)
    metrics = [line.split()[2] for line in lines if line.startswith("metrics on ")][0]
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    directory = directory_pb2_grpc.DirectoryStub(channel)
    analytics = analytics_pb2_grpc.AnalyticsStub(channel)
    pictures = pictures_pb2_grpc.PicturesStub(channel)
    problems = []

    # The seed replayed, and the standby's pool serving.
    until("the standby to replay the seed", lambda: psql(
        STANDBY, f"SELECT count(*) FROM pg_tables WHERE schemaname = '{schema}' AND tablename = 'employees'") == ["1"]
        and psql(STANDBY, f"SELECT count(*) FROM {schema}.employees") == [str(EMPLOYEES)])
    until("the standby's pool", lambda: metric(samples(metrics), "roster_postgres_standby_down", standby_name) == 0)

    # Every read that may go to a standby answers from it.
    page = directory.ListEmployees(directory_pb2.ListEmployeesRequest(page_size=10), timeout=10)
    target = page.employees[0]
    reads = {
        "GetEmployee": lambda: directory.GetEmployee(directory_pb2.GetEmployeeRequest(guid=target.guid), timeout=10),
        "ListEmployees": lambda: directory.ListEmployees(directory_pb2.ListEmployeesRequest(page_size=10), timeout=10),
        "CountEmployees": lambda: directory.CountEmployees(directory_pb2.CountEmployeesRequest(name_contains="a"), timeout=10),
        "StreamEmployees": lambda: list(directory.StreamEmployees(directory_pb2.ListEmployeesRequest(page_size=10), timeout=10)),
        "DepartmentHeadcounts": lambda: analytics.DepartmentHeadcounts(analytics_pb2.DepartmentHeadcountsRequest(), timeout=10),
        "AggregateSales": lambda: analytics.AggregateSales(analytics_pb2.AggregateSalesRequest(
            function=analytics_pb2.AGGREGATE_FUNCTION_SUM, group_by=analytics_pb2.GROUP_BY_DEPARTMENT), timeout=10),
        "EmployeeSales": lambda: analytics.EmployeeSales(analytics_pb2.EmployeeSalesRequest(guid=target.guid), timeout=10),
        "GetThumbnail": lambda: pictures.GetThumbnail(pictures_pb2.GetThumbnailRequest(guid=target.guid), timeout=10),
    }
    for name, read in reads.items():
        before = samples(metrics)
        try:
            read()
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.NOT_FOUND:  # an employee without a picture
                raise
        after = samples(metrics)
        served = metric(after, "roster_postgres_standby_reads_total") - metric(before, "roster_postgres_standby_reads_total")
        fell_back = metric(after, "roster_postgres_standby_fallbacks_total") - metric(before, "roster_postgres_standby_fallbacks_total")
        if served < 1 or fell_back != 0:
            problems.append(f"{name} with a standby up: {served} reads served by it, {fell_back} by the primary")
    if metric(after, "roster_postgres_standby_down", dead_name) != 1:
        problems.append(f"the address where nothing listens is not down on /metrics: {after}")

    # Replay paused: a write, and reads with and without its token.
    psql(STANDBY, "SELECT pg_wal_replay_pause()")
    try:
        renamed = types_pb2.Employee(guid=target.guid, name=target.name + " Renamed")
        updated, call = directory.UpdateEmployee.with_call(directory_pb2.UpdateEmployeeRequest(
            employee=renamed, update_mask=field_mask_pb2.FieldMask(paths=["name"])), timeout=10)
        token = dict(call.initial_metadata()).get(KEY)
        logged = int(psql(PRIMARY, f"SELECT last_seq FROM {schema}.change_log_state")[0])
        if token is None or int(token) != logged:
            problems.append(f"UpdateEmployee's reply carries {KEY} {token!r}, the change log ends at {logged}")
            token = str(logged)
        stale = directory.GetEmployee(directory_pb2.GetEmployeeRequest(guid=target.guid), timeout=10)
        if stale.name != target.name:
            problems.append(f"a read without a token was not served by the paused standby: {stale.name!r}")
        before = samples(metrics)
        began = time.monotonic()
        fresh = directory.GetEmployee(directory_pb2.GetEmployeeRequest(guid=target.guid),
                                      metadata=[(KEY, token)], timeout=10)
        waited = time.monotonic() - began
        listed = directory.ListEmployees(directory_pb2.ListEmployeesRequest(page_size=EMPLOYEES + 10),
                                         metadata=[(KEY, token)], timeout=10)
        after = samples(metrics)
        if fresh.name != renamed.name or renamed.name not in [e.name for e in listed.employees]:
            problems.append(f"a read naming the write's token did not see it: {fresh.name!r}")
        if metric(after, "roster_postgres_standby_fallbacks_total") - metric(before, "roster_postgres_standby_fallbacks_total") != 2:
            problems.append("the reads naming a token the standby had not replayed were not the primary's")
        print(f"standby: a read naming an unreplayed token answered by the primary after {waited * 1000:.0f} ms")

        # A client-streamed write's reply carries its token too; the feed stays on the primary.
        upserted, call = directory.UpsertEmployees.with_call(iter([directory_pb2.UpsertEmployeesRequest(
            employees=[types_pb2.Employee(guid=str(uuid.uuid4()), name="Standby Upsert", department="Sales", start_date="2024-01-02")])]),
            timeout=10)
        upsert_token = dict(call.initial_metadata()).get(KEY)
        if upsert_token is None or int(upsert_token) <= int(token):
            problems.append(f"UpsertEmployees' reply carries {KEY} {upsert_token!r} after {token}")
        feed = directory.WatchChanges(directory_pb2.WatchChangesRequest(after_token=str(int(token) - 1)), timeout=10)
        first = next(feed)
        feed.cancel()
        if first.token != token or first.guid != target.guid:
            problems.append(f"WatchChanges did not replay the write from the primary: {first}")

        # The Connect protocol's reply has the header too.
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/roster.v1.Directory/UpdateEmployee",
            data=json.dumps({"employee": {"guid": target.guid, "about": "standby test"},
                             "updateMask": "about"}).encode(),
            headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as reply:
            connect_token = reply.headers.get(KEY)
        if connect_token is None or int(connect_token) <= int(upsert_token or 0):
            problems.append(f"the Connect reply carries {KEY} {connect_token!r}")

        # Lag on /metrics while paused (read every second).
        time.sleep(1.5)
        lag = metric(samples(metrics), "roster_postgres_standby_lag_changes", standby_name)
        if not lag >= 1:
            problems.append(f"the paused standby's lag in changes is {lag}")

        # Further behind than --postgres-read-max-lag, the standby serves no read.
        until("the standby's lag to pass the limit", lambda: metric(
            samples(metrics), "roster_postgres_standby_lag_seconds", standby_name) > MAX_LAG)
        before = samples(metrics)
        late = directory.GetEmployee(directory_pb2.GetEmployeeRequest(guid=target.guid), timeout=10)
        after = samples(metrics)
        if late.name != renamed.name or metric(after, "roster_postgres_standby_fallbacks_total") \
                - metric(before, "roster_postgres_standby_fallbacks_total") != 1:
            problems.append(f"a standby past the lag limit served a read: {late.name!r}")
    finally:
        psql(STANDBY, "SELECT pg_wal_replay_resume()")

    # Replayed: the token's read is the standby's.
    newest = int(psql(PRIMARY, f"SELECT last_seq FROM {schema}.change_log_state")[0])
    until("the standby to replay the writes", lambda: int(psql(
        STANDBY, f"SELECT last_seq FROM {schema}.change_log_state")[0]) >= newest)
    # Caught up as this replica sees it (past the lag limit until then).
    until("the lag to clear", lambda: metric(samples(metrics), "roster_postgres_standby_lag_seconds", standby_name) == 0)
    before = samples(metrics)
    fresh = directory.GetEmployee(directory_pb2.GetEmployeeRequest(guid=target.guid), metadata=[(KEY, token)], timeout=10)
    after = samples(metrics)
    if fresh.name != renamed.name:
        problems.append(f"after replay, the standby's read is {fresh.name!r}")
    if metric(after, "roster_postgres_standby_reads_total") - metric(before, "roster_postgres_standby_reads_total") != 1 \
            or metric(after, "roster_postgres_standby_fallbacks_total") != metric(before, "roster_postgres_standby_fallbacks_total"):
        problems.append("after replay, the read naming the token was not the standby's")

    # The standby stopped: every read goes to the primary, none fails; started again, the
    # standby serves again, found by its pool (no write meanwhile: the standby may be the
    # primary's synchronous one).
    subprocess.run([os.environ["ROSTER_TEST_POSTGRES_STOP_STANDBY"]], check=True)
    before = samples(metrics)
    failed = []
    for _ in range(20):
        try:
            directory.ListEmployees(directory_pb2.ListEmployeesRequest(page_size=10), timeout=10)
            directory.GetEmployee(directory_pb2.GetEmployeeRequest(guid=target.guid), timeout=10)
        except grpc.RpcError as error:
            failed.append(error.code())
    after = samples(metrics)
    if failed or metric(after, "roster_postgres_standby_down", standby_name) != 1 \
            or metric(after, "roster_postgres_standby_fallbacks_total") - metric(before, "roster_postgres_standby_fallbacks_total") < 39:
        problems.append(f"with the standby stopped: failed calls {failed}, down "
                        f"{metric(after, 'roster_postgres_standby_down', standby_name)}, fallbacks "
                        f"{metric(after, 'roster_postgres_standby_fallbacks_total') - metric(before, 'roster_postgres_standby_fallbacks_total')}")
    subprocess.run([os.environ["ROSTER_TEST_POSTGRES_START_STANDBY"]], check=True)
    until("the standby's pool to find it again", lambda: metric(
        samples(metrics), "roster_postgres_standby_down", standby_name) == 0)
    before = samples(metrics)
    directory.GetEmployee(directory_pb2.GetEmployeeRequest(guid=target.guid), timeout=10)
    after = samples(metrics)
    if metric(after, "roster_postgres_standby_reads_total") - metric(before, "roster_postgres_standby_reads_total") != 1:
        problems.append("the standby started again serves no read")

    # A malformed token names the entry.
    try:
        directory.GetEmployee(directory_pb2.GetEmployeeRequest(guid=target.guid), metadata=[(KEY, "soon")], timeout=10)
        problems.append("a malformed change token was taken")
    except grpc.RpcError as error:
        if error.code() != grpc.StatusCode.INVALID_ARGUMENT or KEY not in error.details():
            problems.append(f"a malformed change token: {error.code()} {error.details()!r}")

    servers.stop(process, log)
    processes.remove(process)
    return servers.verdict(problems, WORK)


if __name__ == "__main__":
    servers.run_script(main, processes)
