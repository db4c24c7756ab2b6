#!/usr/bin/env python3
"""roster backup under a write load, then roster restore, through server processes and grpcio.

A server runs on a demo directory with pictures while a writer creates employees one after
another (each acknowledged before the next is sent). `roster backup` runs in the middle.
Then the writer stops, the backup is restored into a new path, and a second server serves it.

Checks: every create acknowledged before the backup began is in the restored directory; the
creates it holds are a prefix of the acknowledged ones (the snapshot is one instant); and the
restored server answers every ListEmployees page (employees, thumbnails, update times and
page sizes) exactly as the source answers them once the creates after that prefix are set
aside, that is, as the source stood at the snapshot. `roster check` passes on the backup.

Usage: python3 Tests/Interop/backup/backup_test.py ROSTER_BINARY
"""
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import grpc

ROSTER = os.path.abspath(sys.argv[1])
WORK = tempfile.mkdtemp(prefix="roster-backup-")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import rosterstubs  # noqa: E402
import servers  # noqa: E402

rosterstubs.generate(WORK, ["types.proto", "directory.proto"])
from roster.v1 import directory_pb2, directory_pb2_grpc, types_pb2  # noqa: E402

HANG = 60
PAGE = 50



def serve(db, log, seed):
    port = servers.free_port()
    server = subprocess.Popen(
        [ROSTER, "serve", "--port", str(port), "--db", db, "--seed-employees", str(seed),
         "--seed-sales-per-employee", "2", "--no-log-requests"],
        stdout=subprocess.PIPE, stderr=log, text=True)
    if not server.stdout.readline().startswith("listening on "):
        server.kill()
        raise SystemExit(f"the server on {db} did not start; see {log.name}")
    return server, grpc.insecure_channel(f"127.0.0.1:{port}")


def pages(channel):
    """Every page of the default listing: (employees, page size) for each."""
    stub = directory_pb2_grpc.DirectoryStub(channel)
    result, token = [], ""
    while True:
        reply = stub.ListEmployees(directory_pb2.ListEmployeesRequest(page_size=PAGE, page_token=token), timeout=HANG)
        result.append(list(reply.employees))
        token = reply.next_page_token
        if not token:
            return result


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def main():
    source_db = os.path.join(WORK, "source.sqlite")
    log = open(os.path.join(WORK, "serve.log"), "w")
    source = restored = None
    try:
        source, channel = serve(source_db, log, 2000)
        stub = directory_pb2_grpc.DirectoryStub(channel)
        acknowledged = []
        stop = threading.Event()
        failures = []

        def writer():
            n = 0
            while not stop.is_set():
                employee = types_pb2.Employee(name=f"Backup Writer {n:05d}", department="Sales", start_date="2021-03-04")
                n += 1
                try:
                    acknowledged.append(stub.CreateEmployee(directory_pb2.CreateEmployeeRequest(employee=employee),
                                                            timeout=HANG).guid)
                except grpc.RpcError as error:
                    failures.append(error)

        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        while len(acknowledged) < 50:
            time.sleep(0.05)
        before = len(acknowledged)
        backup = subprocess.run([ROSTER, "backup", "--db", source_db, "--out", os.path.join(WORK, "backup")],
                                capture_output=True, text=True, timeout=HANG)
        during = len(acknowledged) - before
        time.sleep(0.5)
        stop.set()
        thread.join(HANG)
        check(backup.returncode == 0, f"backup failed: {backup.stdout}{backup.stderr}")
        check(not failures, f"writes failed: {failures[:3]}")
        print(f"backup under writes: {before} creates acknowledged before it, {during} while it ran; "
              f"{backup.stdout.strip()}", flush=True)
        checked = subprocess.run([ROSTER, "check", "--db", os.path.join(WORK, "backup", "roster.sqlite"),
                                  "--pictures-dir", os.path.join(WORK, "backup", "pictures")],
                                 capture_output=True, text=True, timeout=HANG)
        check(checked.returncode == 0, f"check of the backup: {checked.stdout}{checked.stderr}")

        restored_db = os.path.join(WORK, "restored.sqlite")
        restore = subprocess.run([ROSTER, "restore", os.path.join(WORK, "backup"), "--db", restored_db],
                                 capture_output=True, text=True, timeout=HANG)
        check(restore.returncode == 0, f"restore failed: {restore.stdout}{restore.stderr}")
        restored, restored_channel = serve(restored_db, log, 0)

        got = pages(restored_channel)
        held = {e.guid for page in got for e in page}
        kept = [guid for guid in acknowledged if guid in held]
        check(kept == acknowledged[:len(kept)], "the restored creates are not a prefix of the acknowledged ones")
        check(len(kept) >= before, f"{before - len(kept)} creates acknowledged before the backup are missing")
        later = set(acknowledged[len(kept):])
        source_rows = [e for page in pages(channel) for e in page if e.guid not in later]
        expected = [source_rows[i:i + PAGE] for i in range(0, len(source_rows), PAGE)] or [[]]
        check([len(p) for p in got] == [len(p) for p in expected], "the restored server's page sizes differ")
        for n, (mine, theirs) in enumerate(zip(got, expected)):
            check(mine == theirs, f"page {n} differs from the source's at the snapshot")
        print(f"restored: {len(kept)} of {len(acknowledged)} creates (all {before} acknowledged before the backup); "
              f"{len(got)} pages of {sum(len(p) for p in got)} employees equal to the source's at the snapshot")
        restored_channel.close()
        channel.close()
        servers.stop(restored)
        restored = None
        servers.stop(source)
        source = None
        print("backup test passed")
    finally:
        for server in (restored, source):
            if server is not None:
                server.kill()
                server.wait()
        log.close()
        shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()
