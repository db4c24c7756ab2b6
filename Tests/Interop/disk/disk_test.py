#!/usr/bin/env python3
"""Disk faults, driving the built binary on a small filesystem of the test's own (a tmpfs it
mounts and unmounts; root only), through an LD_PRELOAD shim that fails writes and syncs with
EIO on command (faults.c, built here):

- the disk fills during employee writes and a picture upload: RESOURCE_EXHAUSTED naming the
  full disk, no acknowledged write lost, reads still answered, the fault counted in /metrics;
  once space is freed, writes resume by themselves, with no restart;
- writes and syncs fail with EIO: UNAVAILABLE naming the I/O error, never acknowledged,
  counted and logged; once the disk is healthy, writes resume;
- after all of it, `roster check` finds the database and its pictures whole.

Usage: disk_test.py ROSTER_BINARY
"""
import base64
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROSTER = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.join(ROOT, ".build/debug/roster")
WORK = tempfile.mkdtemp(prefix="roster-disk-")
DISK = os.path.join(WORK, "disk")
TRIGGER = os.path.join(WORK, "fail-writes")
HANG = 60

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import servers  # noqa: E402

SERVER = None
LOG = None
BASE = None
METRICS = None
MOUNTED = False


def setUpModule():
    global SERVER, LOG, BASE, METRICS, MOUNTED
    if os.geteuid() != 0:
        raise RuntimeError("the disk-fault test mounts a tmpfs: run it as root (scripts/test does)")
    os.makedirs(DISK)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", DISK], check=True)
    MOUNTED = True
    shim = os.path.join(WORK, "faults.so")
    subprocess.run(["gcc", "-O2", "-Wall", "-Werror", "-shared", "-fPIC", "-o", shim,
                    os.path.join(os.path.dirname(os.path.abspath(__file__)), "faults.c"), "-ldl"], check=True)
    LOG = open(os.path.join(WORK, "server.log"), "w")
    environment = dict(os.environ, LD_PRELOAD=shim, ROSTER_FAULTS_DIR=DISK, ROSTER_FAULTS_TRIGGER=TRIGGER)
    SERVER = subprocess.Popen(
        [ROSTER, "serve", "--port", "0", "--db", os.path.join(DISK, "roster.sqlite"), "--seed-employees", "40",
         "--seed-sales-per-employee", "2", "--metrics-port", "0"],
        stdout=subprocess.PIPE, stderr=LOG, text=True, env=environment)
    for _ in range(2):
        line = SERVER.stdout.readline()
        if line.startswith("listening on "):
            BASE = "http://" + line.split()[-1]
        elif line.startswith("metrics on "):
            METRICS = line.split()[-1]
        else:
            tearDownModule()
            raise RuntimeError("server did not start: " + open(os.path.join(WORK, "server.log")).read())


def tearDownModule():
    try:
        if SERVER is not None and SERVER.poll() is None:
            servers.stop(SERVER, LOG)
    finally:
        if MOUNTED:
            subprocess.run(["umount", "-l", DISK], check=False)
        shutil.rmtree(WORK, ignore_errors=True)


def call(method, message):
    """A Connect JSON call: (HTTP status, body)."""
    request = urllib.request.Request(f"{BASE}/roster.v1.{method}", data=json.dumps(message).encode(), method="POST",
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=HANG) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def stream(method, messages):
    """A Connect JSON stream in one body: (reply messages, end-of-stream message)."""
    body = b"".join(struct.pack(">BI", 0, len(m)) + m for m in (json.dumps(x).encode() for x in messages))
    request = urllib.request.Request(f"{BASE}/roster.v1.{method}", data=body, method="POST",
                                     headers={"content-type": "application/connect+json"})
    with urllib.request.urlopen(request, timeout=HANG) as response:
        data = response.read()
    out = []
    while data:
        flags, length = struct.unpack(">BI", data[:5])
        out.append(json.loads(data[5:5 + length]))
        data = data[5 + length:]
    return out[:-1], out[-1]


def metric(name, cause):
    with urllib.request.urlopen(METRICS, timeout=HANG) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name + "{") and f'cause="{cause}"' in line:
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def new_employee(index, about=3000):
    return {"employee": {"name": f"Disk Writer {index}", "department": "Sales", "startDate": "2020-01-01",
                         "about": "x" * about}}


class DiskFaults(unittest.TestCase):
    acknowledged = []
    picture = None

    def a_large_picture(self):
        page = call("Directory/ListEmployees", {"pageSize": 40, "readMask": "guid,hasPicture"})[1]
        for employee in page["employees"]:
            if not employee.get("hasPicture"):
                continue
            parts, end = stream("Pictures/GetPicture", [{"guid": employee["guid"]}])
            picture = b"".join(base64.b64decode(p.get("data", "")) for p in parts)
            if len(picture) > 256 << 10:
                return picture
        self.fail("no demo picture is large enough to be a file")

    def upload(self, guid, picture):
        messages = [{"header": {"guid": guid, "contentType": "image/jpeg", "totalSize": str(len(picture))}}]
        messages += [{"chunk": base64.b64encode(picture[i:i + 60000]).decode()} for i in range(0, len(picture), 60000)]
        return stream("Pictures/PutPicture", messages)

    def test_1_a_full_disk(self):
        picture = DiskFaults.picture = self.a_large_picture()
        target = call("Directory/CreateEmployee", new_employee("picture target", about=10))[1]["guid"]
        self.acknowledged.append(target)
        free = os.statvfs(DISK).f_bavail * os.statvfs(DISK).f_frsize
        filler = os.path.join(DISK, "filler")
        with open(filler, "wb") as f:
            f.write(b"\0" * max(0, free - (1 << 20)))
        refusal = None
        for index in range(2000):
            status, body = call("Directory/CreateEmployee", new_employee(index))
            if status != 200:
                refusal = (status, body)
                break
            self.acknowledged.append(body["guid"])
        self.assertIsNotNone(refusal, "the disk never filled")
        self.assertEqual(refusal[0], 429, refusal)
        self.assertEqual(refusal[1]["code"], "resource_exhausted")
        self.assertIn("disk is full", refusal[1]["message"])
        _, end = self.upload(target, picture)
        self.assertEqual(end["error"]["code"], "resource_exhausted", end)
        self.assertIn("disk is full", end["error"]["message"])
        # Reads go on, and every acknowledged write is there.
        for guid in self.acknowledged:
            self.assertEqual(call("Directory/GetEmployee", {"guid": guid})[0], 200)
        self.assertGreaterEqual(metric("roster_disk_faults_total", "disk_full"), 2)
        # Space comes back: writes resume, with no restart.
        os.unlink(filler)
        status, body = call("Directory/CreateEmployee", new_employee("after", about=10))
        self.assertEqual(status, 200, body)
        self.acknowledged.append(body["guid"])
        stored, end = self.upload(target, picture)
        self.assertEqual(end, {}, end)
        self.assertTrue(stored[0]["etag"])

    def test_2_io_errors(self):
        before = metric("roster_disk_faults_total", "io_error")
        with open(TRIGGER, "w"):
            pass
        try:
            status, body = call("Directory/CreateEmployee", new_employee("io", about=10))
            self.assertEqual(status, 503, body)
            self.assertEqual(body["code"], "unavailable")
            self.assertIn("I/O error", body["message"])
            # A new picture (its bytes changed, so not one already stored).
            changed = bytearray(DiskFaults.picture)
            changed[-3] ^= 0x01
            _, end = self.upload(self.acknowledged[0], bytes(changed))
            self.assertEqual(end["error"]["code"], "unavailable", end)
            self.assertIn("I/O error", end["error"]["message"])
            self.assertEqual(call("Directory/CountEmployees", {})[0], 200, "reads go on")
        finally:
            os.unlink(TRIGGER)
        self.assertGreater(metric("roster_disk_faults_total", "io_error"), before)
        with open(os.path.join(WORK, "server.log")) as log:
            self.assertIn("a write failed on the disk", log.read())
        for attempt in range(50):
            status, body = call("Directory/CreateEmployee", new_employee("healed", about=10))
            if status == 200:
                break
            time.sleep(0.2)
        self.assertEqual(status, 200, body)
        self.acknowledged.append(body["guid"])

    def test_3_nothing_lost_and_check_passes(self):
        servers.stop(SERVER, LOG)
        database = os.path.join(DISK, "roster.sqlite")
        check = subprocess.run([ROSTER, "check", "--db", database], capture_output=True, text=True, timeout=HANG)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
        guids = subprocess.run(["sqlite3", database, "SELECT guid FROM employees"], capture_output=True, text=True,
                               check=True).stdout.split()
        self.assertEqual(set(self.acknowledged) - set(guids), set(), "acknowledged writes are all there")


if __name__ == "__main__":
    unittest.main(verbosity=2)
