#!/usr/bin/env python3
"""Faults between every hop (Tests/Interop/faults/run makes the namespaces and runs this in the
clients' one): Roster serves from its own namespace over PostgreSQL in a third, under a steady
load of writes (CreateEmployee, 2 s deadline) and reads (GetEmployee, 1 s deadline), through
these phases:

  steady              nothing wrong
  latency             100 ms +-20 ms each way (a relay), clients to Roster
  loss                5% of packets dropped both ways, clients to Roster
  clients cut off     20 s with every packet between clients and Roster dropped, then healed
  database cut off    20 s with every packet between Roster and PostgreSQL dropped, then healed
  after               nothing wrong

What must hold: no call outlives its deadline (by more than the client's own slack); in the
steady phases every call is OK; under latency and loss most are; while a hop is cut, calls end
with UNAVAILABLE or DEADLINE_EXCEEDED; once healed, reads and writes succeed again by
themselves within RECOVERY seconds; the server closes the clients' half-open connections by
keepalive during the cut (its own keepalive is 5 s, answered within 2 s); no stream slot stays
held; the server's memory stays within RSS_GROWTH_MB of its start; and every acknowledged write
is in PostgreSQL afterwards.

Usage: scripts/postgres run -- python3 faults_test.py ROSTER_BINARY  (through run)
"""
import os
import queue
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid

import grpc

ROSTER = os.path.abspath(sys.argv[1])
SERVER_NS = os.environ["ROSTER_FAULTS_SERVER_NS"]
DATABASE_NS = os.environ["ROSTER_FAULTS_DATABASE_NS"]
CLIENT_LINK = os.environ["ROSTER_FAULTS_CLIENT_LINK"]
DATABASE_LINK = os.environ["ROSTER_FAULTS_DATABASE_LINK"]
URL = os.environ["ROSTER_TEST_POSTGRES_URL"].replace("127.0.0.1", "198.18.2.2")
SERVER, PORT, METRICS_PORT = "198.18.1.2", 50051, 9464
WORK = tempfile.mkdtemp(prefix="roster-faults-")
PHASES = [("steady", 5), ("latency", 15), ("loss", 15), ("clients cut off", 20), ("clients healed", 15),
          ("database cut off", 20), ("database healed", 15), ("after", 5)]
DEADLINES = {"read": 1.0, "write": 2.0}
# grpcio ends a call at its deadline; what it may take beyond that on a busy machine.
SLACK = 1.0
RECOVERY = 15
RSS_GROWTH_MB = 150
KEEPALIVE = 5 + 2

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import rosterstubs  # noqa: E402
import servers  # noqa: E402

STUBS = rosterstubs.generate(WORK, ["types.proto", "directory.proto"])
from roster.v1 import directory_pb2, directory_pb2_grpc, types_pb2  # noqa: E402


def in_namespace(namespace, *command):
    return subprocess.run(["ip", "netns", "exec", namespace, *command], check=True, capture_output=True,
                          text=True).stdout


def cut(link, probability=None):
    """Drops the packets crossing `link` (Roster's end of a hop) both ways: all, or at random."""
    match = ["-m", "statistic", "--mode", "random", "--probability", str(probability)] if probability else []
    in_namespace(SERVER_NS, "iptables-legacy", "-A", "INPUT", "-i", link, *match, "-j", "DROP")
    in_namespace(SERVER_NS, "iptables-legacy", "-A", "OUTPUT", "-o", link, *match, "-j", "DROP")


def heal():
    in_namespace(SERVER_NS, "iptables-legacy", "-F")


class Relay:
    """Forwards TCP connections from a loopback port to Roster, each chunk delivered 100 ms
    +-20 ms after it arrived (in order): latency on the hop from clients to Roster."""

    def __init__(self):
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            client, _ = self.listener.accept()
            upstream = socket.create_connection((SERVER, PORT))
            for source, sink in ((client, upstream), (upstream, client)):
                pending = queue.Queue()
                threading.Thread(target=self.read, args=(source, pending), daemon=True).start()
                threading.Thread(target=self.deliver, args=(sink, pending), daemon=True).start()

    @staticmethod
    def read(source, pending):
        last = 0.0
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                data = b""
            last = max(last, time.monotonic() + random.uniform(0.08, 0.12))
            pending.put((last, data))
            if not data:
                return

    @staticmethod
    def deliver(sink, pending):
        while True:
            when, data = pending.get()
            time.sleep(max(0.0, when - time.monotonic()))
            try:
                if not data:
                    sink.shutdown(socket.SHUT_WR)
                    return
                sink.sendall(data)
            except OSError:
                return


def channel(target):
    # Reconnect soon after a failure: what is measured is the server's recovery, not
    # grpcio's default backoff of up to two minutes.
    return grpc.insecure_channel(target, options=[
        ("grpc.initial_reconnect_backoff_ms", 500), ("grpc.min_reconnect_backoff_ms", 500),
        ("grpc.max_reconnect_backoff_ms", 1000)])


def metric(name):
    with urllib.request.urlopen(f"http://{SERVER}:{METRICS_PORT}/metrics", timeout=10) as reply:
        for line in reply.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.split()[-1])
    return 0.0


def rss_mb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def established_from_clients():
    lines = in_namespace(SERVER_NS, "ss", "-Htn", "state", "established", f"( sport = :{PORT} )").splitlines()
    return sum(1 for line in lines if "198.18.1.1" in line)


def main():
    log = open(os.path.join(WORK, "server.log"), "w")
    server = subprocess.Popen(
        ["ip", "netns", "exec", SERVER_NS, ROSTER, "serve", "--host", SERVER, "--port", str(PORT),
         "--postgres", URL, "--seed-employees", "200", "--no-seed-pictures", "--metrics-port", str(METRICS_PORT),
         "--keepalive-s", "5", "--keepalive-timeout-s", "2", "--no-log-requests",
         # The test hosts' own network, which only this test reaches.
         "--insecure"],
        stdout=subprocess.PIPE, stderr=log, text=True)
    failures = []
    try:
        for _ in range(2):  # "listening on" and "metrics on", in either order
            line = server.stdout.readline()
            if not line.startswith(("listening on ", "metrics on ")):
                raise RuntimeError("server did not start: " + open(os.path.join(WORK, "server.log")).read())
        # `ip netns exec` runs the server in its own process.
        failures = run(server.pid)
    finally:
        servers.stop(server)
    if failures:
        print("faults: FAILED\n  " + "\n  ".join(failures), file=sys.stderr)
        print(open(os.path.join(WORK, "server.log")).read()[-3000:], file=sys.stderr)
        print(f"logs in {WORK}", file=sys.stderr)
        sys.exit(1)
    print("faults: passed", file=sys.stderr)
    shutil.rmtree(WORK)


def run(roster_pid):
    relay = Relay()
    direct = directory_pb2_grpc.DirectoryStub(channel(f"{SERVER}:{PORT}"))
    delayed = directory_pb2_grpc.DirectoryStub(channel(f"127.0.0.1:{relay.port}"))
    guids = [e.guid for e in direct.ListEmployees(directory_pb2.ListEmployeesRequest(page_size=100),
                                                  timeout=30).employees]
    phase = [PHASES[0][0]]
    calls = []           # (phase, kind, start, seconds, code)
    acknowledged = []
    lock = threading.Lock()
    stop = threading.Event()

    def load(kind):
        while not stop.is_set():
            stub = delayed if phase[0] == "latency" else direct
            current, start = phase[0], time.monotonic()
            try:
                if kind == "write":
                    created = stub.CreateEmployee(directory_pb2.CreateEmployeeRequest(employee=types_pb2.Employee(
                        name=f"Fault {uuid.uuid4().hex[:8]}", department="Sales", start_date="2020-01-01")),
                        timeout=DEADLINES[kind])
                    with lock:
                        acknowledged.append(created.guid)
                else:
                    stub.GetEmployee(directory_pb2.GetEmployeeRequest(guid=random.choice(guids)),
                                     timeout=DEADLINES[kind])
                code = "OK"
            except grpc.RpcError as error:
                code = error.code().name
            with lock:
                calls.append((current, kind, start, time.monotonic() - start, code))
            if code != "OK":
                time.sleep(0.05)

    threads = [threading.Thread(target=load, args=(kind,)) for kind in ("read", "read", "write", "write")]
    for thread in threads:
        thread.start()
    rss = [rss_mb(roster_pid)]
    half_open_closed = None
    healed_at = {}
    try:
        for name, seconds in PHASES:
            phase[0] = name
            if name == "loss":
                cut(CLIENT_LINK, 0.05)
            elif name == "clients cut off":
                cut(CLIENT_LINK)
            elif name == "database cut off":
                cut(DATABASE_LINK)
            elif name.endswith("healed") or name == "after":
                heal()
                healed_at.setdefault(name, time.monotonic())
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                time.sleep(1)
                rss.append(rss_mb(roster_pid))
                if name == "clients cut off" and half_open_closed is None and established_from_clients() == 0:
                    half_open_closed = seconds - (end - time.monotonic())
            if name == "latency":
                heal()
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        heal()
    return check(calls, acknowledged, rss, half_open_closed, healed_at)


def check(calls, acknowledged, rss, half_open_closed, healed_at):
    failures = []
    print(f"{'phase':18} {'kind':6} {'calls':>6} {'OK':>6}  other codes", file=sys.stderr)
    for name, _ in PHASES:
        for kind in ("read", "write"):
            mine = [c for c in calls if c[0] == name and c[1] == kind]
            codes = {}
            for c in mine:
                codes[c[4]] = codes.get(c[4], 0) + 1
            ok = codes.pop("OK", 0)
            print(f"{name:18} {kind:6} {len(mine):6} {ok:6}  {codes}", file=sys.stderr)
            if name in ("steady", "after") and codes:
                failures.append(f"{name}: {kind} calls failed with {codes}")
            if name in ("latency", "loss") and ok < 0.5 * len(mine):
                failures.append(f"{name}: only {ok} of {len(mine)} {kind} calls OK")
            if name.endswith("cut off"):
                unexpected = set(codes) - {"UNAVAILABLE", "DEADLINE_EXCEEDED"}
                if unexpected:
                    failures.append(f"{name}: {kind} calls ended with {unexpected}")
    late = [c for c in calls if c[3] > DEADLINES[c[1]] + SLACK]
    if late:
        failures.append(f"{len(late)} calls outlived their deadline, the longest {max(c[3] for c in late):.1f} s: {late[:3]}")
    for name, at in healed_at.items():
        if name == "after":
            continue
        for kind in ("read", "write"):
            first = min((c[2] + c[3] for c in calls if c[1] == kind and c[4] == "OK" and c[2] >= at), default=None)
            took = None if first is None else first - at
            print(f"{name}: first OK {kind} {'never' if took is None else f'{took:.1f} s'} after the heal",
                  file=sys.stderr)
            if took is None or took > RECOVERY:
                failures.append(f"{name}: no OK {kind} within {RECOVERY} s of the heal")
    print(f"half-open client connections closed by the server {half_open_closed} s into the cut",
          file=sys.stderr)
    if half_open_closed is None or half_open_closed > KEEPALIVE + 8:
        failures.append(f"the clients' half-open connections were not closed by keepalive ({half_open_closed})")
    slots = metric("roster_stream_slots_in_use")
    if slots != 0:
        failures.append(f"{slots} stream slots still held")
    print(f"server RSS {rss[0]:.0f} MB at the start, at most {max(rss):.0f} MB", file=sys.stderr)
    if max(rss) > rss[0] + RSS_GROWTH_MB:
        failures.append(f"RSS grew from {rss[0]:.0f} MB to {max(rss):.0f} MB")
    stored = set(in_namespace(DATABASE_NS, "psql", os.environ["ROSTER_TEST_POSTGRES_URL"], "-Atc",
                              "SELECT guid FROM roster.employees").split())
    lost = [guid for guid in acknowledged if guid not in stored]
    print(f"{len(acknowledged)} writes acknowledged, {len(lost)} missing from PostgreSQL", file=sys.stderr)
    if lost:
        failures.append(f"{len(lost)} acknowledged writes are not in PostgreSQL: {lost[:5]}")
    return failures


if __name__ == "__main__":
    main()
