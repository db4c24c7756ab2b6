#!/usr/bin/env python3
"""Fair limits per caller against the built binary: with `--caller-rate`, a caller that sends
calls faster than its rate is refused with RESOURCE_EXHAUSTED and a google.rpc.RetryInfo (in
grpc-status-details-bin, and as a Connect error detail), counted on /metrics, while another
caller's calls all pass; a role's own rate (`--caller-rate-for`) replaces it; health is never
limited; without tokens, callers are told apart by address.

Usage: limits_test.py ROSTER_BINARY
"""
import base64
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

import grpc
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
ROSTER = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.join(ROOT, ".build/debug/roster")
WORK = tempfile.mkdtemp(prefix="roster-limits-")
RATE, BURST = 5, 10

sys.path.insert(0, os.path.join(HERE, ".."))
import rosterstubs  # noqa: E402
import servers  # noqa: E402

rosterstubs.generate(WORK, ["types.proto", "directory.proto"])
from roster.v1 import directory_pb2, directory_pb2_grpc  # noqa: E402

SERVERS = []


def serve(*flags, tokens=True):
    """A server with `flags`: (its address, base URL, metrics URL)."""
    log = open(os.path.join(WORK, f"server-{len(SERVERS)}.log"), "w")
    args = [ROSTER, "serve", "--port", "0", "--db", os.path.join(WORK, f"limits-{len(SERVERS)}.sqlite"),
            "--seed-employees", "5", "--no-seed-pictures", "--seed-sales-per-employee", "0", "--metrics-port", "0",
            *flags]
    if tokens:
        args += ["--tokens", os.path.join(WORK, "tokens")]
    server = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True)
    SERVERS.append((server, log))
    target = metrics = None
    for _ in range(2):
        line = server.stdout.readline()
        if line.startswith("listening on "):
            target = line.split()[-1]
        elif line.startswith("metrics on "):
            metrics = line.split()[-1]
    return target, f"http://{target}", metrics


def count(stub, token=None):
    metadata = [("authorization", f"Bearer {token}")] if token else []
    try:
        stub.CountEmployees(directory_pb2.CountEmployeesRequest(), metadata=metadata, timeout=10)
        return grpc.StatusCode.OK, None
    except grpc.RpcError as error:
        return error.code(), error


class CallerLimitsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tokens = servers.write_tokens(ROSTER, WORK, ("reader", "writer", "admin"))

    def test_a_flooding_caller_is_refused_and_another_is_not(self):
        target, base, metrics = serve("--caller-rate", str(RATE), "--caller-burst", str(BURST),
                                      "--caller-rate-for", "admin=1000")
        # Each caller on a connection of its own, as separate clients are.
        stubs = {name: directory_pb2_grpc.DirectoryStub(grpc.insecure_channel(target)) for name in self.tokens}
        # The flood: far past the burst, at once (all sent before any answer, so no refill
        # between them lets it through, however slow the machine), and past the 32 refusals
        # that pause its connection (CallerRateInterceptor.ignoredRefusals).
        metadata = [("authorization", f"Bearer {self.tokens['reader']}")]
        flood = [stubs["reader"].CountEmployees.future(directory_pb2.CountEmployeesRequest(), metadata=metadata,
                                                         timeout=10) for _ in range(BURST + 60)]
        results = []
        for call in flood:
            try:
                call.result()
                results.append((grpc.StatusCode.OK, None))
            except grpc.RpcError as error:
                results.append((error.code(), error))
        passed = [code for code, _ in results if code == grpc.StatusCode.OK]
        refused = [error for code, error in results if code == grpc.StatusCode.RESOURCE_EXHAUSTED]
        self.assertEqual(len(passed) + len(refused), len(results))
        self.assertGreaterEqual(len(passed), BURST)
        self.assertGreaterEqual(len(refused), 32, "refused enough times to have its connection paused")
        # Each refusal says when to retry, as google.rpc.RetryInfo in grpc-status-details-bin.
        trailers = dict(refused[0].trailing_metadata())
        status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
        self.assertEqual(status.code, grpc.StatusCode.RESOURCE_EXHAUSTED.value[0])
        retry = error_details_pb2.RetryInfo()
        self.assertTrue(status.details[0].Unpack(retry))
        delay = retry.retry_delay.seconds + retry.retry_delay.nanos / 1e9
        self.assertGreater(delay, 0)
        self.assertLessEqual(delay, 1 / RATE + 0.01)
        # Another caller, and an admin at its own rate, pass meanwhile.
        self.assertEqual([count(stubs["writer"], self.tokens["writer"])[0] for _ in range(BURST)],
                         [grpc.StatusCode.OK] * BURST)
        self.assertEqual([count(stubs["admin"], self.tokens["admin"])[0] for _ in range(4 * BURST)],
                         [grpc.StatusCode.OK] * (4 * BURST))
        # Health is open, never limited.
        health = health_pb2_grpc.HealthStub(grpc.insecure_channel(target))
        for _ in range(4 * BURST):
            health.Check(health_pb2.HealthCheckRequest(), timeout=10)
        # The Connect protocol (HTTP/1.1) carries the same detail: its calls at once too, each
        # on a connection of its own.
        def connect_count(_):
            request = urllib.request.Request(f"{base}/roster.v1.Directory/CountEmployees", data=b"{}", method="POST",
                                             headers={"Content-Type": "application/json",
                                                      "Authorization": f"Bearer {self.tokens['reader']}"})
            try:
                urllib.request.urlopen(request, timeout=10).read()
                return None
            except urllib.error.HTTPError as error:
                return error.code, json.loads(error.read())
        with concurrent.futures.ThreadPoolExecutor(max_workers=4 * BURST) as pool:
            refusals = [refusal for refusal in pool.map(connect_count, range(4 * BURST)) if refusal]
        if not refusals:
            self.fail("no Connect call was refused")
        status_code, body = refusals[0]
        self.assertEqual(status_code, 429)
        self.assertEqual(body["code"], "resource_exhausted")
        self.assertEqual(body["details"][0]["type"], "google.rpc.RetryInfo")
        error_details_pb2.RetryInfo.FromString(base64.b64decode(body["details"][0]["value"] + "=="))
        # Waiting out the delay lets the caller in again.
        time.sleep(2 * delay + 1 / RATE)
        self.assertEqual(count(stubs["reader"], self.tokens["reader"])[0], grpc.StatusCode.OK)
        text = urllib.request.urlopen(metrics, timeout=10).read().decode()
        samples = {line.split()[0]: float(line.split()[-1]) for line in text.splitlines()
                   if line.startswith("roster_rpc_rate_")}
        self.assertGreaterEqual(samples.get("roster_rpc_rate_limited_total", 0), len(refused) + 1, samples)
        # The flood ignored a burst's worth of refusals: its connection was paused.
        self.assertGreaterEqual(samples.get("roster_rpc_rate_pauses_total", 0), 1, samples)

    def test_without_tokens_callers_are_told_apart_by_address(self):
        target, _, _ = serve("--caller-rate", str(RATE), "--caller-burst", str(BURST), tokens=False)
        stub = directory_pb2_grpc.DirectoryStub(grpc.insecure_channel(target))
        # At once, as the flood above: a burst passes, the rest past the rate is refused.
        calls = [stub.CountEmployees.future(directory_pb2.CountEmployeesRequest(), timeout=10)
                 for _ in range(4 * BURST)]
        codes = [call.code() for call in calls]
        self.assertIn(grpc.StatusCode.RESOURCE_EXHAUSTED, codes)
        self.assertGreaterEqual(codes.count(grpc.StatusCode.OK), BURST)
        self.assertEqual(codes.count(grpc.StatusCode.OK) + codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED),
                         len(codes))


if __name__ == "__main__":
    try:
        result = unittest.TextTestRunner(verbosity=2).run(
            unittest.TestLoader().loadTestsFromTestCase(CallerLimitsTest))
    finally:
        for server, log in SERVERS:
            servers.stop(server, log)
        shutil.rmtree(WORK, ignore_errors=True)
    sys.exit(0 if result.wasSuccessful() else 1)
