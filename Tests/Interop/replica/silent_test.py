#!/usr/bin/env python3
"""PostgreSQL stops answering: a Roster replica reaches PostgreSQL through a proxy that, mid-run,
stops forwarding in both directions and keeps every socket open: a network that drops
everything, or a server gone without a word (what a restart under TLS was seen to leave, in
restart_test.py, where a replica then did not stop after SIGTERM).

A write is sent first and held at PostgreSQL by a row lock this test takes on a connection of
its own, so that it is waiting on its statement when the silence begins; so are two heavy reads
(a name search and a count, one statement each), held by locks on the tables they read. A heavy
read stopped there must not then wait for good on a statement sent after it (a ROLLBACK, when
the read ran in a transaction), which postgres-nio never answers on a connection that has closed
(seen before the fix in 2 of 6 runs where the silence began mid-statement).

Checks, while PostgreSQL is silent: unary reads that bring no deadline end with the server's
default deadline (DEADLINE_EXCEEDED from the server, not a hang); reads with a client deadline
and a WatchChanges stream the client cancels end; a write ends with UNAVAILABLE or its client's
deadline. Then SIGTERM stops the server within 30 s, exit status 0, though every connection it
has to PostgreSQL still waits for an answer and the write is still in the group-commit writer
(which would wait for the statement timeout, here 60 s, and 5 s more, but for the shutdown's
drain limit).

Usage: scripts/postgres run -- python3 Tests/Interop/replica/silent_test.py ROSTER_BINARY
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

import grpc

ROSTER = os.path.abspath(sys.argv[1])
URL = os.environ["ROSTER_TEST_POSTGRES_URL"]
WORK = tempfile.mkdtemp(prefix="roster-pg-silent-")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import rosterstubs  # noqa: E402
import servers  # noqa: E402

STUBS = rosterstubs.generate(WORK, ["types.proto", "directory.proto"])
from roster.v1 import directory_pb2, directory_pb2_grpc, types_pb2  # noqa: E402

SCHEMA = "silent_test"
DEFAULT_DEADLINE_MS = 1500
# Longer than any answer the server should give once PostgreSQL is silent.
HANG = 20


class Proxy:
    """Forwards TCP connections to `upstream` until `silence()`; then reads nothing more from
    either side and keeps every socket open."""

    def __init__(self, upstream):
        self.upstream = upstream
        self.silent = threading.Event()
        self.closed = threading.Event()
        self.sockets = []
        self.lock = threading.Lock()
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            with self.lock:
                self.sockets += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self.pump, args=(source, sink), daemon=True).start()

    def pump(self, source, sink):
        source.settimeout(0.1)
        while not self.closed.is_set():
            if self.silent.is_set():
                time.sleep(0.1)
                continue
            try:
                data = source.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            if not data:
                if not self.silent.is_set():
                    sink.shutdown(socket.SHUT_WR)
                return
            try:
                sink.sendall(data)
            except OSError:
                return

    def silence(self):
        self.silent.set()

    def close(self):
        self.closed.set()
        self.listener.close()
        with self.lock:
            for s in self.sockets:
                s.close()


def main():
    parsed = urllib.parse.urlsplit(URL)
    proxy = Proxy((parsed.hostname, parsed.port))
    proxied = urllib.parse.urlunsplit(parsed._replace(netloc=f"{parsed.username}@127.0.0.1:{proxy.port}"))
    log = open(os.path.join(WORK, "server.log"), "w")
    port = servers.free_port()
    server = subprocess.Popen(
        [ROSTER, "serve", "--port", str(port), "--postgres", proxied + "?sslmode=disable",
         "--postgres-schema", SCHEMA, "--seed-employees", "20", "--no-log-requests",
         "--default-deadline-ms", str(DEFAULT_DEADLINE_MS), "--max-query-seconds", "60",
         "--shutdown-grace-s", "2", "--postgres-connections", "16"],
        stdout=subprocess.PIPE, stderr=log, text=True)
    failures = []
    locker = None
    try:
        line = server.stdout.readline()
        if not line.startswith("listening on "):
            raise SystemExit(f"the server did not start; see {WORK}")
        # A session of the test's own, straight to PostgreSQL (not through the proxy).
        locker = subprocess.Popen(["psql", "-q", "-X", "-t", "-A", "-v", "ON_ERROR_STOP=1", URL],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  env=dict(os.environ, PGOPTIONS=f"-c search_path={SCHEMA}"))
        try:
            run(f"127.0.0.1:{port}", proxy, locker)
        except SystemExit as error:
            failures.append(str(error))
    finally:
        if locker is not None:
            locker.kill()
            locker.wait()
        # Stopped while PostgreSQL is still silent.
        started = time.monotonic()
        try:
            servers.stop(server, log)
            print(f"silent_test: stopped {time.monotonic() - started:.1f} s after SIGTERM", file=sys.stderr)
            log_text = open(os.path.join(WORK, "server.log")).read()
            if "a write transaction got no answer" not in log_text:
                failures.append("the write did not wait on PostgreSQL until the shutdown's drain limit")
        except AssertionError as error:
            failures.append(str(error))
        proxy.close()
    if failures:
        raise SystemExit("; ".join(failures) + f" (log in {WORK})")
    shutil.rmtree(WORK, ignore_errors=True)
    print("silent_test: ok", file=sys.stderr)


def run(target, proxy, locker):
    channel = grpc.insecure_channel(target)
    stub = directory_pb2_grpc.DirectoryStub(channel)
    employees = stub.ListEmployees(directory_pb2.ListEmployeesRequest(page_size=5), timeout=HANG).employees
    guids = [e.guid for e in employees]
    if len(guids) != 5:
        raise SystemExit(f"expected 5 seeded employees, got {len(guids)}")
    stub.GetEmployee(directory_pb2.GetEmployeeRequest(guid=guids[0]), timeout=HANG)
    # Concurrent pages, so the pool holds several idle connections.
    barrier = threading.Barrier(12)

    def pages_together():
        for _ in range(10):
            barrier.wait()
            stub.ListEmployees(directory_pb2.ListEmployeesRequest(page_size=5), timeout=HANG)

    pages = [threading.Thread(target=pages_together) for _ in range(12)]
    for thread in pages:
        thread.start()
    for thread in pages:
        thread.join()
    results, lock = [], threading.Lock()

    def call(name, invoke, allowed):
        began = time.monotonic()
        try:
            invoke()
            outcome = "OK"
        except grpc.RpcError as error:
            outcome = error.code().name
        with lock:
            results.append((name, outcome, time.monotonic() - began, allowed))

    calls = [
        # No deadline from the client: the server's default one must end them.
        ("GetEmployee", lambda: stub.GetEmployee(directory_pb2.GetEmployeeRequest(guid=guids[1])), {"DEADLINE_EXCEEDED"}),
        ("BatchGetEmployees", lambda: stub.BatchGetEmployees(
            directory_pb2.BatchGetEmployeesRequest(guids=guids[2:4])), {"DEADLINE_EXCEEDED"}),
        # A client deadline.
        ("GetEmployee/2s", lambda: stub.GetEmployee(
            directory_pb2.GetEmployeeRequest(guid=guids[4]), timeout=2), {"DEADLINE_EXCEEDED"}),
        ("CreateEmployee/4s", lambda: stub.CreateEmployee(directory_pb2.CreateEmployeeRequest(
            employee=types_pb2.Employee(name="Silent Writer", department="Sales", start_date="2020-01-01")),
            timeout=4), {"DEADLINE_EXCEEDED", "UNAVAILABLE"}),
    ]
    # Started before the silence, and waiting on PostgreSQL when it begins (the table lock).
    held = [
        ("ListEmployees/held", lambda: stub.ListEmployees(
            directory_pb2.ListEmployeesRequest(page_size=7, name_contains="a")), {"DEADLINE_EXCEEDED"}),
        ("CountEmployees/held", lambda: stub.CountEmployees(
            directory_pb2.CountEmployeesRequest(name_contains="b")), {"DEADLINE_EXCEEDED"}),
    ]
    calls += held
    threads = [threading.Thread(target=call, args=c, daemon=True) for c in calls]
    held_threads = threads[-len(held):]
    threads = threads[:-len(held)]

    # A watcher whose client gives up after 2 s: its stream reads the change log first, from
    # before a write (the demo data is logged as one gap, which no token before it passes).
    _, written = stub.UpdateEmployee.with_call(directory_pb2.UpdateEmployeeRequest(
        employee=types_pb2.Employee(guid=guids[0], about="before the silence"),
        update_mask={"paths": ["about"]}), timeout=HANG)
    before = int(dict(written.initial_metadata())["x-roster-change-token"]) - 1
    watch = stub.WatchChanges(directory_pb2.WatchChangesRequest(after_token=str(before)))
    threading.Timer(2, watch.cancel).start()
    threads.append(threading.Thread(target=call, args=(
        "WatchChanges", lambda: [None for _ in watch], {"CANCELLED"}), daemon=True))
    # The write first, before the silence, held at PostgreSQL by a lock this test takes on
    # the change log's counter row (which every write batch locks first): then its statement,
    # not a wait for a connection, is what gets no answer.
    locker.stdin.write("BEGIN;\nSELECT 1 FROM change_log_state WHERE id = 1 FOR UPDATE;\n"
                       "LOCK TABLE employees, name_counts IN ACCESS EXCLUSIVE MODE;\n\\echo locked\n")
    locker.stdin.flush()
    for line in locker.stdout:
        if line.strip() == "locked":
            break
    else:
        raise SystemExit("could not lock the change log's counter row")
    threads[-2].start()
    for thread in held_threads:
        thread.start()
    time.sleep(0.5)
    # The proxy now drops everything; what the server had cached must not hide that.
    proxy.silence()
    time.sleep(0.5)
    for thread in threads[:-2] + threads[-1:]:
        thread.start()
    for thread in threads + held_threads:
        thread.join(timeout=HANG)
    channel.close()
    with lock:
        for name, outcome, seconds, _ in sorted(results):
            print(f"silent_test: {name}: {outcome} after {seconds:.1f} s", file=sys.stderr)
        answered = {name for name, *_ in results}
        missing = [name for name, *_ in calls if name not in answered]
        if missing:
            raise SystemExit(f"no answer within {HANG} s while PostgreSQL was silent: {missing}")
        wrong = [(name, outcome) for name, outcome, _, allowed in results if outcome not in allowed]
        if wrong:
            raise SystemExit(f"unexpected outcomes: {wrong}")


if __name__ == "__main__":
    main()
