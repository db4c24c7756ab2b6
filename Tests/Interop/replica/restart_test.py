#!/usr/bin/env python3
"""PostgreSQL restarted under load: two Roster replicas over one PostgreSQL database, four
grpcio writers creating employees on them, and a WatchChanges watcher on each; in the middle
the cluster is restarted (a fast shutdown: every connection is cut, then it comes back on the
same address).

Checks: the calls that fail, fail with UNAVAILABLE and nothing else; the replicas reconnect by
themselves (every writer has writes acknowledged after the restart, with no replica
restarted); every acknowledged write is there afterwards, on both replicas; each watcher,
resuming from its last token whenever its stream ends with UNAVAILABLE, sees every
acknowledged write, its tokens strictly increasing.

Usage: scripts/postgres run -- python3 Tests/Interop/replica/restart_test.py ROSTER_BINARY
"""
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import grpc
from google.protobuf import duration_pb2

ROSTER = os.path.abspath(sys.argv[1])
URL = os.environ["ROSTER_TEST_POSTGRES_URL"] + os.environ.get("ROSTER_RESTART_URL_SUFFIX", "")
RESTART = os.environ["ROSTER_TEST_POSTGRES_RESTART"]
WORK = tempfile.mkdtemp(prefix="roster-pg-restart-")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import rosterstubs  # noqa: E402
import servers  # noqa: E402

STUBS = rosterstubs.generate(WORK, ["types.proto", "directory.proto"])
from roster.v1 import directory_pb2, directory_pb2_grpc, types_pb2  # noqa: E402

SCHEMA = "restart_test"
WRITERS = 4
HANG = 60



def main():
    replicas, logs, targets = [], [], []
    try:
        for index in range(2):
            log = open(os.path.join(WORK, f"replica-{index}.log"), "w")
            logs.append(log)
            port = servers.free_port()
            replica = subprocess.Popen(
                [ROSTER, "serve", "--port", str(port), "--postgres", URL, "--postgres-schema", SCHEMA,
                 "--seed-employees", "0", "--no-log-requests"],
                stdout=subprocess.PIPE, stderr=log, text=True)
            replicas.append(replica)
            line = replica.stdout.readline()
            if not line.startswith("listening on "):
                raise SystemExit(f"replica {index} did not start; see {WORK}")
            targets.append(f"127.0.0.1:{port}")
        run(targets)
        for replica in replicas:
            if replica.poll() is not None:
                raise SystemExit("a replica exited; the restart should not have stopped it")
    finally:
        failures = []
        for replica, log in zip(replicas, logs):
            try:
                servers.stop(replica, log)
            except AssertionError as error:
                failures.append(str(error))
        if not failures:
            shutil.rmtree(WORK, ignore_errors=True)
        else:
            raise SystemExit("; ".join(failures) + f" (logs in {WORK})")


def run(targets):
    stop = threading.Event()   # writers stop
    done = threading.Event()   # watchers stop
    lock = threading.Lock()
    acknowledged = []          # guids
    after_restart = [0] * WRITERS
    failures = {}              # status code name -> count
    restarted = threading.Event()

    def writer(index):
        channel = grpc.insecure_channel(targets[index % 2])
        stub = directory_pb2_grpc.DirectoryStub(channel)
        count = 0
        while not stop.is_set():
            request = directory_pb2.CreateEmployeeRequest(employee=types_pb2.Employee(
                name=f"Restart Writer {index}-{count}", department="Sales", start_date="2020-01-01"))
            count += 1
            try:
                created = stub.CreateEmployee(request, timeout=HANG)
            except grpc.RpcError as error:
                with lock:
                    failures[error.code().name] = failures.get(error.code().name, 0) + 1
                time.sleep(0.05)
                continue
            with lock:
                acknowledged.append(created.guid)
                if restarted.is_set():
                    after_restart[index] += 1
        channel.close()

    seen = [[], []]            # per watcher: (token, guid)
    watcher_errors = []

    def watcher(index):
        channel = grpc.insecure_channel(targets[index])
        stub = directory_pb2_grpc.DirectoryStub(channel)
        token = "0"
        while not done.is_set():
            # Heartbeats every second, so the loop sees `done` even when nothing changes.
            call = stub.WatchChanges(directory_pb2.WatchChangesRequest(
                after_token=token, heartbeat_interval=duration_pb2.Duration(seconds=1)))
            try:
                for event in call:
                    if done.is_set():
                        call.cancel()
                        break
                    if event.heartbeat:
                        continue
                    seen[index].append((int(event.token), event.guid))
                    token = event.token
            except grpc.RpcError as error:
                if done.is_set():
                    break
                if error.code() != grpc.StatusCode.UNAVAILABLE:
                    watcher_errors.append(f"watcher {index}: {error.code().name} {error.details()}")
                    break
                time.sleep(0.2)
        channel.close()

    watchers = [threading.Thread(target=watcher, args=(i,), daemon=True) for i in range(2)]
    writers = [threading.Thread(target=writer, args=(i,), daemon=True) for i in range(WRITERS)]
    for thread in watchers + writers:
        thread.start()
    time.sleep(3)
    started = time.monotonic()
    subprocess.run([RESTART], check=True, timeout=120)
    restarted.set()
    print(f"restart_test: PostgreSQL restarted in {time.monotonic() - started:.1f} s", file=sys.stderr)
    deadline = time.monotonic() + HANG
    while time.monotonic() < deadline and min(after_restart) < 20:
        time.sleep(0.2)
    stop.set()
    for thread in writers:
        thread.join()
    with lock:
        print(f"restart_test: {len(acknowledged)} writes acknowledged, {after_restart} after the restart; "
              f"failures {failures}", file=sys.stderr)
        if min(after_restart) < 20:
            raise SystemExit(f"writers did not recover after the restart: {after_restart}")
        if set(failures) - {"UNAVAILABLE"}:
            raise SystemExit(f"failures other than UNAVAILABLE: {failures}")
        wanted = set(acknowledged)

    # Every acknowledged write on both replicas, and in both watchers' feeds.
    for target in targets:
        with grpc.insecure_channel(target) as channel:
            stub = directory_pb2_grpc.DirectoryStub(channel)
            found = {e.guid for e in stub.BatchGetEmployees(
                directory_pb2.BatchGetEmployeesRequest(guids=sorted(wanted)[:1000]), timeout=HANG).employees}
            missing = set(sorted(wanted)[:1000]) - found
            if missing:
                raise SystemExit(f"{len(missing)} acknowledged writes missing on {target}")
            count = stub.CountEmployees(directory_pb2.CountEmployeesRequest(), timeout=HANG).count
            if count < len(wanted):
                raise SystemExit(f"{target} counts {count} employees, fewer than {len(wanted)} acknowledged")
    deadline = time.monotonic() + HANG
    while time.monotonic() < deadline and any(wanted - {guid for _, guid in s} for s in seen):
        time.sleep(0.2)
    done.set()
    for thread in watchers:
        thread.join(timeout=HANG)
        if thread.is_alive():
            raise SystemExit("a watcher did not stop")
    if watcher_errors:
        raise SystemExit("; ".join(watcher_errors))
    for index, events in enumerate(seen):
        missing = wanted - {guid for _, guid in events}
        if missing:
            raise SystemExit(f"watcher {index} missed {len(missing)} acknowledged writes")
        tokens = [token for token, _ in events]
        if any(b <= a for a, b in zip(tokens, tokens[1:])):
            raise SystemExit(f"watcher {index}: tokens not strictly increasing")
    print(f"restart_test: ok; both watchers saw all {len(wanted)} writes in order", file=sys.stderr)


if __name__ == "__main__":
    main()
