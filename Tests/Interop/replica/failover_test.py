#!/usr/bin/env python3
"""PostgreSQL failover under load: two Roster replicas on a primary and its synchronous hot
standby, named together in one address (`postgres://…@PRIMARY,STANDBY/roster?
target_session_attrs=read-write`). Four writers, two readers and two WatchChanges followers
(one per replica, each resuming after the last token it saw when its stream fails) run while
the primary's postmaster is killed with SIGKILL and the standby promoted.

Checks: every acknowledged write is on the new primary; calls fail only with UNAVAILABLE while
there is no primary (none waits out its deadline); writes resume through both replicas with no
restart; each follower's feed is the change log's, in commit order, with no change missing and
none twice. Prints the time from the promotion to the first acknowledged write.

Usage: ROSTER_POSTGRES_STANDBY=sync scripts/postgres run -- \
         python3 Tests/Interop/replica/failover_test.py ROSTER_BINARY
"""
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import grpc

ROSTER = os.path.abspath(sys.argv[1])
URL = os.environ["ROSTER_TEST_POSTGRES_FAILOVER_URL"]
STANDBY = os.environ["ROSTER_TEST_POSTGRES_STANDBY_URL"]
WORK = tempfile.mkdtemp(prefix="roster-failover-")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import rosterstubs  # noqa: E402
import servers  # noqa: E402

STUBS = rosterstubs.generate(WORK, ["types.proto", "directory.proto"])
from roster.v1 import directory_pb2, directory_pb2_grpc, types_pb2  # noqa: E402

WRITERS, READERS = 4, 2
DEADLINE = 10
processes = []


def start_replica(port, schema):
    log = open(os.path.join(WORK, f"replica-{port}.log"), "w")
    process = subprocess.Popen(
        [ROSTER, "serve", "--port", str(port), "--postgres", URL, "--postgres-schema", schema,
         "--seed-employees", "0", "--no-log-requests", "--metrics-port", "0"],
        stdout=subprocess.PIPE, stderr=log, text=True)
    processes.append(process)
    return process


def psql(url, sql):
    return subprocess.run(["psql", url, "-tAc", sql], check=True, capture_output=True,
                          text=True).stdout.split()


class Follower:
    """WatchChanges on one replica from now, resuming after its last token when the stream
    fails (as a client that must see every change does)."""

    def __init__(self, port):
        self.stub = directory_pb2_grpc.DirectoryStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
        self.seen, self.errors, self.resumed = [], [], 0
        self.stop = threading.Event()
        self.feed = None
        self.thread = threading.Thread(target=self.follow)

    def follow(self):
        after = ""
        while not self.stop.is_set():
            self.feed = self.stub.WatchChanges(directory_pb2.WatchChangesRequest(after_token=after))
            try:
                for event in self.feed:
                    if not event.heartbeat:
                        self.seen.append(int(event.token))
                        after = event.token
            except grpc.RpcError as error:
                if self.stop.is_set():
                    return
                if error.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
                    self.errors.append((error.code(), error.details()))
                self.resumed += 1
                time.sleep(0.2)

    def close(self):
        self.stop.set()
        if self.feed is not None:
            self.feed.cancel()
        self.thread.join()


def main():
    schema = "failover_" + str(os.getpid())
    ports = [servers.free_port(), servers.free_port()]
    replicas = [start_replica(port, schema) for port in ports]
    metrics = []
    for replica in replicas:
        # "metrics on URL" and "listening on ADDRESS", in either order.
        lines = [replica.stdout.readline(), replica.stdout.readline()]
        if not any(line.startswith("listening on ") for line in lines):
            raise SystemExit("a replica did not start; see " + WORK)
        metrics += [line.split()[2] for line in lines if line.startswith("metrics on ")]
    start_sequence = int((psql(STANDBY, f"SELECT last_seq FROM {schema}.change_log_state") or ["0"])[0])
    followers = [Follower(port) for port in ports]
    for follower in followers:
        follower.thread.start()
    time.sleep(0.5)

    acked, failures, failed_for, stop = [], [], [], threading.Event()
    lock = threading.Lock()
    promoted = []

    def writer(index):
        stub = directory_pb2_grpc.DirectoryStub(grpc.insecure_channel(f"127.0.0.1:{ports[index % 2]}"))
        made = 0
        while not stop.is_set():
            began = time.monotonic()
            try:
                employee = stub.CreateEmployee(directory_pb2.CreateEmployeeRequest(employee=types_pb2.Employee(
                    name=f"Failover Writer {index} {made}", department="Sales", start_date="2023-03-01")),
                    timeout=DEADLINE)
                with lock:
                    acked.append((time.monotonic(), index, employee.guid))
                made += 1
            except grpc.RpcError as error:
                with lock:
                    failures.append((index, error.code(), error.details()))
                    failed_for.append(time.monotonic() - began)
                time.sleep(0.05)

    def reader(index):
        stub = directory_pb2_grpc.DirectoryStub(grpc.insecure_channel(f"127.0.0.1:{ports[index % 2]}"))
        while not stop.is_set():
            began = time.monotonic()
            try:
                stub.ListEmployees(directory_pb2.ListEmployeesRequest(page_size=20), timeout=DEADLINE)
            except grpc.RpcError as error:
                with lock:
                    failures.append((f"reader {index}", error.code(), error.details()))
                    failed_for.append(time.monotonic() - began)
                time.sleep(0.05)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
    threads += [threading.Thread(target=reader, args=(i,)) for i in range(READERS)]
    for thread in threads:
        thread.start()
    time.sleep(3)
    before = len(acked)
    subprocess.run([os.environ["ROSTER_TEST_POSTGRES_KILL"]], check=True)
    time.sleep(1)
    subprocess.run([os.environ["ROSTER_TEST_POSTGRES_PROMOTE"]], check=True)
    promoted.append(time.monotonic())
    # Until both replicas' writers are acknowledged again, then a little longer.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with lock:
            after = {index % 2 for at, index, _ in acked if at > promoted[0]}
        if after == {0, 1}:
            break
        time.sleep(0.1)
    time.sleep(2)
    stop.set()
    for thread in threads:
        thread.join()

    # The followers catch up with the change log's end, then stop.
    log = [int(seq) for seq in psql(STANDBY, f"SELECT seq FROM {schema}.change_log WHERE seq > {start_sequence} ORDER BY seq")]
    wait = time.monotonic() + 15
    while time.monotonic() < wait and any(not f.seen or f.seen[-1] < log[-1] for f in followers):
        time.sleep(0.1)
    for follower in followers:
        follower.close()
    stored = set(psql(STANDBY, f"SELECT guid FROM {schema}.employees"))
    # Each replica counted the host it lost and the move to the promoted standby.
    scraped = []
    for url in metrics:
        text = urllib.request.urlopen(url, timeout=10).read().decode()
        samples = dict(line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))
        scraped.append({name: float(samples.get(name, "0")) for name in (
            "roster_postgres_hosts_lost_total", "roster_postgres_host_moves_total", "roster_postgres_finding_host")})
    missing = [guid for _, _, guid in acked if guid not in stored]
    first = min((at for at, _, _ in acked if at > promoted[0]), default=None)
    resumed = first - promoted[0] if first is not None else None
    codes = {}
    for _, code, _ in failures:
        codes[code.name] = codes.get(code.name, 0) + 1

    print(f"failover: {len(acked)} writes acknowledged ({before} before the kill), failed calls {codes} "
          f"(the longest {max(failed_for, default=0) * 1000:.0f} ms), "
          f"first write acknowledged {resumed * 1000:.0f} ms after the promotion; followers saw "
          f"{[len(f.seen) for f in followers]} changes of {len(log)}, resumed {[f.resumed for f in followers]} times"
          if resumed is not None else f"failover: no write acknowledged after the promotion; failed calls {codes}")
    problems = []
    if before < 20:
        problems.append(f"too little load: {before} writes before the kill")
    for number, sample in enumerate(scraped):
        if sample["roster_postgres_hosts_lost_total"] < 1 or sample["roster_postgres_host_moves_total"] != 1 \
                or sample["roster_postgres_finding_host"] != 0:
            problems.append(f"replica {number}'s metrics do not show one move to the new primary: {sample}")
    if len(scraped) != 2:
        problems.append(f"metrics scraped from {len(scraped)} replicas, not 2")
    if resumed is None:
        problems.append("no write was acknowledged after the promotion")
    if missing:
        problems.append(f"{len(missing)} acknowledged writes are missing on the new primary: {missing[:5]}")
    if any(code != grpc.StatusCode.UNAVAILABLE for _, code, _ in failures):
        problems.append(f"failures other than UNAVAILABLE: {[f for f in failures if f[1] != grpc.StatusCode.UNAVAILABLE][:5]}")
    for number, follower in enumerate(followers):
        if follower.seen != log:
            seen = set(follower.seen)
            problems.append(
                f"follower {number}'s feed is not the change log's: {len(follower.seen)} changes, "
                f"{len(follower.seen) - len(seen)} twice, {len(set(log) - seen)} missing, "
                f"{len(seen - set(log))} not in the log, in order: {follower.seen == sorted(follower.seen)}")
        if follower.errors:
            problems.append(f"follower {number} failed: {follower.errors[:3]}")
    return servers.verdict(problems, WORK)


if __name__ == "__main__":
    servers.run_script(main, processes)
