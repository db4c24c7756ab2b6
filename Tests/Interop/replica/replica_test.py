#!/usr/bin/env python3
"""Two Roster replicas over one PostgreSQL database, behind nginx (deploy/nginx/
roster-replicas.conf), under concurrent reads and writes from Python's grpcio; one replica
is killed with SIGKILL in the middle.

Checks: every acknowledged write is present afterwards; the only failures are UNAVAILABLE,
at most one per client (the call it had in flight on the killed replica); a watcher on the
surviving replica sees every acknowledged write, in strictly increasing tokens.

Usage: scripts/postgres run -- python3 Tests/Interop/replica/replica_test.py ROSTER_BINARY
"""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import grpc

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROSTER = os.path.abspath(sys.argv[1])
URL = os.environ["ROSTER_TEST_POSTGRES_URL"]
WORK = tempfile.mkdtemp(prefix="roster-replicas-")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import rosterstubs  # noqa: E402
import servers  # noqa: E402

STUBS = rosterstubs.generate(WORK, ["types.proto", "directory.proto"])
from roster.v1 import directory_pb2, directory_pb2_grpc, types_pb2  # noqa: E402

CLIENTS = 8
processes = []



def start_replica(port, schema):
    log = open(os.path.join(WORK, f"replica-{port}.log"), "w")
    process = subprocess.Popen(
        [ROSTER, "serve", "--port", str(port), "--postgres", URL, "--postgres-schema", schema,
         "--seed-employees", "0", "--no-log-requests"],
        stdout=subprocess.PIPE, stderr=log, text=True)
    processes.append(process)
    return process


def wait_listening(process):
    line = process.stdout.readline()
    if not line.startswith("listening on "):
        raise SystemExit("a replica did not start; see " + WORK)


def start_nginx(port, upstreams):
    config = open(os.path.join(ROOT, "deploy/nginx/roster-replicas.conf")).read()
    config = config.replace("server 127.0.0.1:50051", f"server 127.0.0.1:{upstreams[0]}")
    config = config.replace("server 127.0.0.1:50052", f"server 127.0.0.1:{upstreams[1]}")
    # Plaintext HTTP/2 on loopback for the test; the deployed file terminates TLS.
    config = config.replace("listen 443 ssl http2;", f"listen 127.0.0.1:{port} http2;")
    config = "\n".join(line for line in config.splitlines() if "ssl_" not in line)
    with open(os.path.join(WORK, "replicas.conf"), "w") as f:
        f.write(config)
    with open(os.path.join(WORK, "nginx.conf"), "w") as f:
        f.write(f"pid {WORK}/nginx.pid;\nerror_log {WORK}/nginx-error.log;\ndaemon off;\n"
                f"events {{}}\nhttp {{ access_log off; include {WORK}/replicas.conf; }}\n")
    process = subprocess.Popen(["nginx", "-c", os.path.join(WORK, "nginx.conf"), "-p", WORK])
    processes.append(process)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return process
        except OSError:
            time.sleep(0.05)
    raise SystemExit("nginx did not start")


def main():
    schema = "replicas_" + str(os.getpid())
    ports = [servers.free_port(), servers.free_port()]
    # Both at once: they migrate the new schema together (one does, the other waits).
    replicas = [start_replica(port, schema) for port in ports]
    for replica in replicas:
        wait_listening(replica)
    front = servers.free_port()
    start_nginx(front, ports)

    # A watcher on the replica that survives, from now.
    survivor = grpc.insecure_channel(f"127.0.0.1:{ports[1]}")
    watched, watch_errors = [], []
    feed = directory_pb2_grpc.DirectoryStub(survivor).WatchChanges(directory_pb2.WatchChangesRequest())

    def watch():
        try:
            for event in feed:
                watched.append((int(event.token), event.guid, event.kind))
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.CANCELLED:
                watch_errors.append(error)
    watcher = threading.Thread(target=watch)
    watcher.start()
    time.sleep(0.5)

    acked, failures, stop = [], [], threading.Event()
    lock = threading.Lock()

    def client(index):
        channel = grpc.insecure_channel(f"127.0.0.1:{front}")
        stub = directory_pb2_grpc.DirectoryStub(channel)
        made = 0
        while not stop.is_set():
            try:
                employee = stub.CreateEmployee(directory_pb2.CreateEmployeeRequest(employee=types_pb2.Employee(
                    name=f"Replica Client {index} {made}", department=["Sales", "Design"][made % 2],
                    start_date="2023-03-01")), timeout=10)
                with lock:
                    acked.append(employee.guid)
                made += 1
                stub.GetEmployee(directory_pb2.GetEmployeeRequest(guid=employee.guid), timeout=10)
                stub.ListEmployees(directory_pb2.ListEmployeesRequest(page_size=20), timeout=10)
            except grpc.RpcError as error:
                with lock:
                    failures.append((index, error.code(), error.details()))
        channel.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for thread in threads:
        thread.start()
    time.sleep(3)
    before = len(acked)
    replicas[0].send_signal(signal.SIGKILL)
    replicas[0].wait()
    time.sleep(3)
    stop.set()
    for thread in threads:
        thread.join()
    after = len(acked) - before

    # Every acknowledged write, read back through the survivor.
    stub = directory_pb2_grpc.DirectoryStub(survivor)
    missing = []
    for guid in acked:
        try:
            stub.GetEmployee(directory_pb2.GetEmployeeRequest(guid=guid), timeout=10)
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.NOT_FOUND:
                raise
            missing.append(guid)
    # The watcher has seen every acknowledged create, in strictly increasing tokens.
    deadline = time.time() + 10
    while time.time() < deadline and not set(acked) <= {guid for _, guid, _ in watched}:
        time.sleep(0.1)
    feed.cancel()
    watcher.join()
    tokens = [token for token, _, _ in watched]
    unseen = set(acked) - {guid for _, guid, _ in watched}

    print(f"replicas: {len(acked)} writes acknowledged ({before} before the kill, {after} after), "
          f"{len(failures)} failed calls, {len(watched)} changes watched")
    problems = []
    if before < 20 or after < 20:
        problems.append(f"too little load: {before} writes before the kill, {after} after")
    if missing:
        problems.append(f"{len(missing)} acknowledged writes are missing")
    if any(code != grpc.StatusCode.UNAVAILABLE for _, code, _ in failures):
        problems.append(f"failures other than UNAVAILABLE: {failures}")
    per_client = {}
    for index, _, _ in failures:
        per_client[index] = per_client.get(index, 0) + 1
    if any(count > 1 for count in per_client.values()):
        problems.append(f"more than the in-flight call failed for a client: {per_client}")
    if unseen:
        problems.append(f"the survivor's watcher missed {len(unseen)} acknowledged writes")
    if tokens != sorted(set(tokens)):
        problems.append("the watcher's tokens are not strictly increasing")
    if watch_errors:
        problems.append(f"the watcher failed: {watch_errors}")
    return servers.verdict(problems, WORK)


if __name__ == "__main__":
    servers.run_script(main, processes)
