#!/usr/bin/env python3
"""Roster against hostile clients: the built binary, driven by a raw HTTP/2 client (the `h2`
package from PyPI) and by `grpcio`, with the requests a client that crashes, lies or floods
sends.

Every case checks what the client gets (a clear status, or a closed connection), and then,
through `after_abuse`, that the server is still well: `Health.Check` answers on a connection
of its own (its latency against the idle p99 is printed, never bounded: speeds belong in
benchmarks, and this runs beside other suites on 2 cores), its RSS stays under RSS_BOUND_MB,
and no per-client stream slot is left held (`roster_stream_slots_in_use` on /metrics goes
back to 0).

Usage: abuse_test.py ROSTER_BINARY   (scripts/test runs it on both transports: set
ROSTER_SERVE_ARGS for more `roster serve` flags)
"""
import gzip
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
import urllib.request
import zlib

import grpc
import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
from grpc_health.v1 import health_pb2, health_pb2_grpc

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROSTER = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.join(ROOT, ".build/debug/roster")
WORK = tempfile.mkdtemp(prefix="roster-abuse-")
SERVE_ARGS = os.environ.get("ROSTER_SERVE_ARGS", "").split()
# The server's resident memory may not pass this after any case (a debug build serves about
# 60-90 MB here; a leak per stream or per connection passes it quickly).
RSS_BOUND_MB = int(os.environ.get("ROSTER_ABUSE_RSS_MB", "400"))
MAX_STREAMS_PER_CLIENT = 32
# A generous bound on any wait, which only a hang reaches.
HANG = 60

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import rosterstubs  # noqa: E402
import servers  # noqa: E402

STUBS = rosterstubs.generate(WORK, ["types.proto", "directory.proto", "pictures.proto"])
from roster.v1 import directory_pb2, directory_pb2_grpc, pictures_pb2  # noqa: E402

SERVER = None
HOST, PORT, METRICS_URL = None, None, None
IDLE_P99 = None


def setUpModule():
    global SERVER, HOST, PORT, METRICS_URL, IDLE_P99
    log = open(os.path.join(WORK, "server.log"), "w")
    SERVER = subprocess.Popen(
        [ROSTER, "serve", "--port", "0", "--db", os.path.join(WORK, "abuse.sqlite"), "--seed-employees", "300",
         "--metrics-port", "0", "--max-streams-per-client", str(MAX_STREAMS_PER_CLIENT)]
        + SERVE_ARGS,
        stdout=subprocess.PIPE, stderr=log, text=True)
    for _ in range(2):
        line = SERVER.stdout.readline()
        if line.startswith("listening on "):
            HOST, PORT = line.split()[-1].rsplit(":", 1)
            PORT = int(PORT)
        elif line.startswith("metrics on "):
            METRICS_URL = line.split()[-1]
        else:
            raise RuntimeError("server did not start: " + open(os.path.join(WORK, "server.log")).read())
    IDLE_P99 = health_p99(200)
    print(f"abuse: idle Health.Check p99 {IDLE_P99 * 1000:.2f} ms", file=sys.stderr)


def tearDownModule():
    servers.stop(SERVER)
    shutil.rmtree(WORK, ignore_errors=True)


# --- What the server must still be after each case --------------------------------------------

def health_p99(calls):
    with grpc.insecure_channel(f"{HOST}:{PORT}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        stub.Check(health_pb2.HealthCheckRequest(), timeout=HANG)
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            stub.Check(health_pb2.HealthCheckRequest(), timeout=HANG)
            times.append(time.perf_counter() - started)
    times.sort()
    return times[int(len(times) * 0.99) - 1]


def rss_mb():
    with open(f"/proc/{SERVER.pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def metric(name):
    with urllib.request.urlopen(METRICS_URL, timeout=HANG) as response:
        text = response.read().decode()
    total = None
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total = (total or 0) + float(line.rsplit(" ", 1)[1])
    return total


def wait_for(what, predicate, limit=HANG):
    """Waits for `predicate()` to hold (polling), failing after `limit` seconds: a hang guard."""
    deadline = time.monotonic() + limit
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {limit} s waiting for {what}")
        time.sleep(0.1)


def slots_released(what):
    """Waits until no per-client stream slot is held. Each round of a test that holds the cap and
    goes must see its slots freed before the next round opens streams from the same address:
    opened while the last round's slots were still held, they would all be refused, and the next
    round would wait for slots that are never taken."""
    wait_for(f"{what}: every stream slot released", lambda: (metric("roster_stream_slots_in_use") or 0) == 0)


class Abuse(unittest.TestCase):
    def after_abuse(self, case):
        self.assertIsNone(SERVER.poll(), f"{case}: the server exited")
        p99 = health_p99(50)
        print(f"abuse: {case}: Health.Check p99 {p99 * 1000:.2f} ms "
              f"({p99 / IDLE_P99:.1f}x idle), RSS {rss_mb():.0f} MB", file=sys.stderr)
        self.assertLess(rss_mb(), RSS_BOUND_MB, f"{case}: RSS over {RSS_BOUND_MB} MB")
        slots_released(case)

    def assert_refused(self, trailers, reset, status, mentioning):
        """The call ended with `status`, its message mentioning why."""
        self.assertEqual(trailers.get("grpc-status"), status, (trailers, reset))
        self.assertIn(mentioning, trailers.get("grpc-message", ""))

    # --- Raw HTTP/2 -------------------------------------------------------------------------

    def connect(self, window=None):
        sock = socket.create_connection((HOST, PORT), timeout=HANG)
        conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        conn.initiate_connection()
        if window is not None:
            conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
        sock.sendall(conn.data_to_send())
        return sock, conn

    @staticmethod
    def headers(method, extra=()):
        return [(":method", "POST"), (":scheme", "http"), (":path", method), (":authority", f"{HOST}:{PORT}"),
                ("content-type", "application/grpc"), ("te", "trailers")] + list(extra)

    @staticmethod
    def frame(message, compressed=False):
        return struct.pack(">BI", 1 if compressed else 0, len(message)) + message

    def call(self, method, body, extra=(), end=True):
        """One call on a new connection, its body sent in 16 KB DATA frames as flow control
        allows (the server may answer before it has all): (response headers, body bytes,
        trailers, reset code or "closed")."""
        sock, conn = self.connect()
        try:
            stream = conn.get_next_available_stream_id()
            conn.send_headers(stream, self.headers(method, extra), end_stream=not body and end)
            sock.sendall(conn.data_to_send())
            reply = Reply()
            sent = 0
            while sent < len(body) and not reply.done:
                window = min(conn.local_flow_control_window(stream), conn.max_outbound_frame_size, 16384)
                if window <= 0:
                    self.pump(sock, conn, stream, reply)
                    continue
                chunk = body[sent:sent + window]
                sent += len(chunk)
                conn.send_data(stream, chunk, end_stream=end and sent >= len(body))
                sock.sendall(conn.data_to_send())
            while not reply.done:
                self.pump(sock, conn, stream, reply)
            return reply.headers, reply.data, reply.trailers, reply.reset
        finally:
            sock.close()

    def read(self, sock, conn, stream):
        reply = Reply()
        while not reply.done:
            self.pump(sock, conn, stream, reply)
        return reply.headers, reply.data, reply.trailers, reply.reset

    @staticmethod
    def pump(sock, conn, stream, reply):
        """Reads what the server sent once, into `reply`."""
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, socket.timeout):
            chunk = b""
        if not chunk:
            reply.reset = reply.reset or "closed"
            reply.done = True
            return
        for event in conn.receive_data(chunk):
            if isinstance(event, h2.events.ResponseReceived) and event.stream_id == stream:
                reply.headers = dict(event.headers)
                if "grpc-status" in reply.headers:
                    reply.trailers = reply.headers
            elif isinstance(event, h2.events.DataReceived) and event.stream_id == stream:
                reply.data += event.data
                conn.acknowledge_received_data(event.flow_controlled_length, stream)
            elif isinstance(event, h2.events.TrailersReceived) and event.stream_id == stream:
                reply.trailers = dict(event.headers)
            elif isinstance(event, h2.events.StreamReset) and event.stream_id == stream:
                reply.reset = event.error_code
            if isinstance(event, (h2.events.StreamEnded, h2.events.StreamReset)) and event.stream_id == stream:
                reply.done = True
        try:
            sock.sendall(conn.data_to_send())
        except OSError:
            pass

    def employee_guid(self):
        with grpc.insecure_channel(f"{HOST}:{PORT}") as channel:
            page = directory_pb2_grpc.DirectoryStub(channel).ListEmployees(
                directory_pb2.ListEmployeesRequest(page_size=1), timeout=HANG)
            return page.employees[0].guid

    # --- Clients that go away holding streams ----------------------------------------------

    def test_killed_grpcio_clients_release_their_stream_slots(self):
        """A grpcio process opens more WatchChanges streams than allowed and is killed with
        SIGKILL, five times over; every slot comes back, and streaming works again."""
        script = textwrap.dedent(f"""
            import sys, time, grpc
            sys.path.insert(0, {STUBS!r})
            from roster.v1 import directory_pb2, directory_pb2_grpc
            channel = grpc.insecure_channel("{HOST}:{PORT}")
            stub = directory_pb2_grpc.DirectoryStub(channel)
            calls = [stub.WatchChanges(directory_pb2.WatchChangesRequest()) for _ in range(40)]
            refused = 0
            for call in calls:
                try:
                    call.initial_metadata()
                except grpc.RpcError:
                    refused += 1
            print("open", refused, flush=True)
            time.sleep(600)
        """)
        for round in range(5):
            child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
            try:
                line = child.stdout.readline()
                self.assertTrue(line.startswith("open"), f"round {round}: the client printed {line!r}")
                wait_for("slots held", lambda: (metric("roster_stream_slots_in_use") or 0) >= MAX_STREAMS_PER_CLIENT - 8)
            finally:
                child.kill()
                child.wait()
                child.stdout.close()
            slots_released(f"round {round}")
        self.after_abuse("killed grpcio clients")
        with grpc.insecure_channel(f"{HOST}:{PORT}") as channel:
            pages = list(directory_pb2_grpc.DirectoryStub(channel).StreamEmployees(
                directory_pb2.ListEmployeesRequest(page_size=100), timeout=HANG))
            self.assertGreaterEqual(sum(len(p.employees) for p in pages), 300)

    def test_raw_clients_that_close_their_socket_release_their_stream_slots(self):
        """A raw HTTP/2 client opens 40 StreamEmployees and WatchChanges streams, reads nothing
        (window 0), and closes its socket, five times over."""
        for round in range(5):
            sock, conn = self.connect(window=0)
            for index in range(40):
                method = "/roster.v1.Directory/" + ("WatchChanges" if index % 2 else "StreamEmployees")
                stream = conn.get_next_available_stream_id()
                conn.send_headers(stream, self.headers(method))
                conn.send_data(stream, self.frame(b""), end_stream=True)
            sock.sendall(conn.data_to_send())
            wait_for(f"round {round}: slots held", lambda: (metric("roster_stream_slots_in_use") or 0) >= 1)
            sock.close()
            slots_released(f"round {round}")
        self.after_abuse("raw clients closing their socket")

    def test_pipelined_calls_never_read(self):
        """1,500 unary calls on one connection with window 0, never read, then the socket closes."""
        sock, conn = self.connect(window=0)
        request = self.frame(directory_pb2.ListEmployeesRequest(page_size=50).SerializeToString())
        try:
            for _ in range(1500):
                stream = conn.get_next_available_stream_id()
                conn.send_headers(stream, self.headers("/roster.v1.Directory/ListEmployees"))
                conn.send_data(stream, request, end_stream=True)
                sock.sendall(conn.data_to_send())
        except (h2.exceptions.TooManyStreamsError, OSError):
            pass
        sock.close()
        self.after_abuse("pipelined calls never read")

    # --- Messages that lie -------------------------------------------------------------------

    def test_length_prefix_over_the_limit(self):
        """A 2 GB length prefix with 16 bytes behind it: RESOURCE_EXHAUSTED at once, nothing
        buffered."""
        body = struct.pack(">BI", 0, 0x7FFFFFFF) + b"x" * 16
        headers, _, trailers, reset = self.call("/roster.v1.Directory/UpsertEmployees", body, end=False)
        self.assertEqual(trailers.get("grpc-status"), "8", (headers, trailers, reset))
        self.assertIn("over the limit", trailers.get("grpc-message", ""))
        self.after_abuse("2 GB length prefix")

    def test_length_prefix_longer_than_the_body(self):
        """A prefix of 100 bytes with 10 behind it, then the end of the stream: a status, not a hang."""
        body = struct.pack(">BI", 0, 100) + b"\x0a" * 10
        _, _, trailers, reset = self.call("/roster.v1.Directory/GetEmployee", body)
        self.assertIsNotNone(trailers.get("grpc-status") or reset, "no status and no reset")
        self.assertNotEqual(trailers.get("grpc-status"), "0")
        self.after_abuse("short body")

    def test_compressed_flag_without_an_encoding(self):
        message = gzip.compress(directory_pb2.GetEmployeeRequest(guid=self.employee_guid()).SerializeToString())
        _, _, trailers, reset = self.call("/roster.v1.Directory/GetEmployee", self.frame(message, compressed=True))
        self.assert_refused(trailers, reset, "13", "grpc-encoding")
        self.after_abuse("compressed flag, no encoding")

    def test_gzip_request_is_answered_in_gzip(self):
        guid = self.employee_guid()
        message = gzip.compress(directory_pb2.GetEmployeeRequest(guid=guid).SerializeToString())
        headers, data, trailers, _ = self.call(
            "/roster.v1.Directory/GetEmployee", self.frame(message, compressed=True),
            extra=[("grpc-encoding", "gzip"), ("grpc-accept-encoding", "gzip")])
        self.assertEqual(trailers.get("grpc-status"), "0", trailers)
        flag, length = struct.unpack(">BI", data[:5])
        reply = data[5:5 + length]
        if flag:
            self.assertEqual(headers.get("grpc-encoding"), "gzip")
            reply = gzip.decompress(reply)
        from roster.v1 import types_pb2
        employee = types_pb2.Employee.FromString(reply)
        self.assertEqual(employee.guid, guid)
        # A page of 50 is large enough to be compressed.
        message = zlib.compress(directory_pb2.ListEmployeesRequest(page_size=50).SerializeToString())
        headers, data, trailers, _ = self.call(
            "/roster.v1.Directory/ListEmployees", self.frame(message, compressed=True),
            extra=[("grpc-encoding", "deflate"), ("grpc-accept-encoding", "gzip,deflate")])
        self.assertEqual(trailers.get("grpc-status"), "0", trailers)
        self.assertEqual(headers.get("grpc-encoding"), "deflate", headers)
        flag, length = struct.unpack(">BI", data[:5])
        self.assertEqual(flag, 1)
        page = directory_pb2.ListEmployeesResponse.FromString(zlib.decompress(data[5:5 + length]))
        self.assertEqual(len(page.employees), 50)
        self.after_abuse("gzip and deflate")

    def test_gzip_picture_replies_are_not_compressed(self):
        """JPEG does not shrink: a picture asked for in gzip comes back uncompressed, while a
        page asked for the same way comes back in gzip."""
        with grpc.insecure_channel(f"{HOST}:{PORT}") as channel:
            page = directory_pb2_grpc.DirectoryStub(channel).ListEmployees(
                directory_pb2.ListEmployeesRequest(page_size=50), timeout=HANG)
        guid = next(e.guid for e in page.employees if e.has_picture)
        extra = [("grpc-encoding", "gzip"), ("grpc-accept-encoding", "gzip")]
        message = gzip.compress(pictures_pb2.GetPictureRequest(guid=guid).SerializeToString())
        headers, data, trailers, _ = self.call("/roster.v1.Pictures/GetPicture", self.frame(message, compressed=True),
                                               extra=extra)
        self.assertEqual(trailers.get("grpc-status"), "0", trailers)
        self.assertNotEqual(headers.get("grpc-encoding"), "gzip", headers)
        offset, chunks = 0, 0
        while offset < len(data):
            flag, length = struct.unpack(">BI", data[offset:offset + 5])
            self.assertEqual(flag, 0, "a picture chunk came compressed")
            offset, chunks = offset + 5 + length, chunks + 1
        self.assertGreater(chunks, 0)
        message = gzip.compress(directory_pb2.ListEmployeesRequest(page_size=50).SerializeToString())
        headers, data, trailers, _ = self.call("/roster.v1.Directory/ListEmployees",
                                               self.frame(message, compressed=True), extra=extra)
        self.assertEqual(trailers.get("grpc-status"), "0", trailers)
        self.assertEqual(headers.get("grpc-encoding"), "gzip", headers)
        self.assertEqual(data[0], 1, "a page asked for in gzip came uncompressed")
        self.after_abuse("pictures in gzip")

    def test_zip_bomb(self):
        """1 GB of zeros in gzip (about 1 MB on the wire): RESOURCE_EXHAUSTED, in bounded memory."""
        compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
        chunk = b"\0" * (1 << 20)
        bomb = b"".join(compressor.compress(chunk) for _ in range(1024)) + compressor.flush()
        before = rss_mb()
        _, _, trailers, reset = self.call(
            "/roster.v1.Directory/UpsertEmployees", self.frame(bomb, compressed=True),
            extra=[("grpc-encoding", "gzip")])
        self.assert_refused(trailers, reset, "8", "inflates past the limit")
        print(f"abuse: zip bomb of {len(bomb)} bytes; RSS {before:.0f} -> {rss_mb():.0f} MB", file=sys.stderr)
        self.after_abuse("zip bomb")

    def test_unsupported_encoding(self):
        _, _, trailers, _ = self.call("/roster.v1.Directory/GetEmployee", self.frame(b""),
                                      extra=[("grpc-encoding", "br")])
        self.assertEqual(trailers.get("grpc-status"), "12", trailers)
        self.assertIn("gzip", trailers.get("grpc-accept-encoding", ""))

    def test_malformed_grpc_timeout(self):
        """Refused as grpc-go refuses them (INTERNAL, "malformed grpc-timeout"), never taken as
        no deadline."""
        request = self.frame(directory_pb2.CountEmployeesRequest().SerializeToString())
        for value in ("abc", "-5S", "99999999999H", "10Z", "S", "1.5S"):
            _, _, trailers, _ = self.call("/roster.v1.Directory/CountEmployees", request,
                                          extra=[("grpc-timeout", value)])
            self.assertEqual(trailers.get("grpc-status"), "13", (value, trailers))
            self.assertIn("malformed grpc-timeout", trailers.get("grpc-message", ""), value)
        _, _, trailers, _ = self.call("/roster.v1.Directory/CountEmployees", request, extra=[("grpc-timeout", "5S")])
        self.assertEqual(trailers.get("grpc-status"), "0", trailers)

    def test_wrong_method_content_type_and_te(self):
        request = self.frame(directory_pb2.CountEmployeesRequest().SerializeToString())
        sock, conn = self.connect()
        try:
            stream = conn.get_next_available_stream_id()
            headers = [h for h in self.headers("/roster.v1.Directory/CountEmployees") if h[0] != ":method"]
            conn.send_headers(stream, [(":method", "PUT")] + headers)
            conn.send_data(stream, request, end_stream=True)
            sock.sendall(conn.data_to_send())
            _, _, trailers, reset = self.read(sock, conn, stream)
            self.assertEqual(trailers.get("grpc-status"), "3", (trailers, reset))
        finally:
            sock.close()
        plain = [h if h[0] != "content-type" else ("content-type", "text/plain")
                 for h in self.headers("/roster.v1.Directory/CountEmployees")]
        sock, conn = self.connect()
        try:
            stream = conn.get_next_available_stream_id()
            conn.send_headers(stream, plain)
            conn.send_data(stream, request, end_stream=True)
            sock.sendall(conn.data_to_send())
            headers, _, _, _ = self.read(sock, conn, stream)
            self.assertEqual(headers.get(":status"), "415", headers)
        finally:
            sock.close()
        self.after_abuse("wrong method and content type")

    def test_malformed_header_blocks(self):
        """Header blocks RFC 9113 calls malformed (uppercase or connection-specific names, `te`
        other than trailers, pseudo-headers missing, repeated, unknown, after a regular field or
        in trailers, bytes a value may not hold): each stream is reset with PROTOCOL_ERROR (1),
        and the same connection then answers a Health.Check."""
        health = "/grpc.health.v1.Health/Check"
        good = self.headers(health)
        without = lambda name: [h for h in good if h[0] != name]
        requests = {
            "an uppercase name": good + [("X-Upper", "1")],
            "a connection-specific field": good + [("connection", "keep-alive")],
            "te other than trailers": without("te") + [("te", "gzip")],
            "no :path": without(":path"),
            "no :method": without(":method"),
            "an empty :path": without(":path") + [(":path", "")],
            "a repeated :method": good[:1] + good,
            "an unknown pseudo-header": good[:4] + [(":status", "200")] + good[4:],
            "a pseudo-header after a regular field": without(":authority") + [(":authority", "x")],
            "a space in :path": without(":path")[:2] + [(":path", "/grpc.health.v1.Health/Check x")]
                                + without(":path")[2:],
            "a line feed in a value": good + [("x-note", "a\nb")],
        }
        trailers = {
            "a pseudo-header in trailers": [(":method", "POST")],
            "a connection-specific field in trailers": [("transfer-encoding", "chunked")],
        }
        loose = h2.config.H2Configuration(client_side=True, header_encoding="utf-8",
                                          validate_outbound_headers=False,
                                          normalize_outbound_headers=False)
        for case, block in list(requests.items()) + list(trailers.items()):
            sock = socket.create_connection((HOST, PORT), timeout=HANG)
            conn = h2.connection.H2Connection(config=loose)
            conn.initiate_connection()
            try:
                stream = conn.get_next_available_stream_id()
                if case in trailers:
                    conn.send_headers(stream, good)
                    conn.send_data(stream, self.frame(b""))
                    conn.send_headers(stream, block, end_stream=True)
                else:
                    conn.send_headers(stream, block, end_stream=False)
                    conn.send_data(stream, self.frame(b""), end_stream=True)
                sock.sendall(conn.data_to_send())
                _, _, reply, reset = self.read(sock, conn, stream)
                self.assertEqual(reset, 1, f"{case}: {reply}, reset {reset}")
                # The connection lives on: a call on it is answered.
                stream = conn.get_next_available_stream_id()
                conn.send_headers(stream, good)
                conn.send_data(stream, self.frame(b""), end_stream=True)
                sock.sendall(conn.data_to_send())
                _, _, reply, reset = self.read(sock, conn, stream)
                self.assertEqual(reply.get("grpc-status"), "0", f"after {case}: {reply}, reset {reset}")
            finally:
                sock.close()
        self.after_abuse("malformed header blocks")

    # --- Floods ------------------------------------------------------------------------------

    def test_continuation_flood_stops_the_reading(self):
        """HEADERS without END_HEADERS, then CONTINUATION frames without end: the server answers
        with GOAWAY and stops reading, so the client can send only what the socket buffers hold."""
        sock = socket.create_connection((HOST, PORT), timeout=HANG)
        conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
        conn.initiate_connection()
        sock.sendall(conn.data_to_send())
        headers = b"\x82\x86\x84"  # :method POST... (indexed), enough to start a block
        sock.sendall(struct.pack(">I", len(headers))[1:] + b"\x01\x00" + struct.pack(">I", 1) + headers)
        payload = b"\x40\x03abc\x03def" * 100
        frame = struct.pack(">I", len(payload))[1:] + b"\x09\x00" + struct.pack(">I", 1) + payload
        sent = 0
        sock.settimeout(5)
        deadline = time.monotonic() + 20
        try:
            while time.monotonic() < deadline and sent < 256 << 20:
                sock.sendall(frame * 16)
                sent += len(frame) * 16
        except (socket.timeout, BrokenPipeError, ConnectionResetError, OSError):
            pass
        finally:
            sock.close()
        print(f"abuse: CONTINUATION flood: {sent / 1e6:.1f} MB sent before the server stopped reading",
              file=sys.stderr)
        self.assertLess(sent, 32 << 20, "the server kept reading a connection it had refused")
        self.after_abuse("CONTINUATION flood")

    def test_connection_error_closes_the_connection(self):
        """HEADERS on a stream the client has reset (h2spec http2/5.1/9), a connection error:
        the server sends GOAWAY with an error code and closes the connection (RFC 9113 § 5.4.1),
        rather than leaving it open after the GOAWAY."""
        sock, conn = self.connect()
        try:
            stream = conn.get_next_available_stream_id()
            conn.send_headers(stream, self.headers("/roster.v1.Directory/CountEmployees"))
            conn.reset_stream(stream)
            sock.sendall(conn.data_to_send())
            # The same HEADERS again on the reset stream, framed by hand (h2 refuses to).
            block = conn.encoder.encode(self.headers("/roster.v1.Directory/CountEmployees"))
            sock.sendall(struct.pack(">I", len(block))[1:] + b"\x01\x05" + struct.pack(">I", stream) + block)
            received, closed = b"", False
            sock.settimeout(10)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    chunk = sock.recv(65536)
                except socket.timeout:
                    break
                except ConnectionResetError:
                    closed = True
                    break
                if not chunk:
                    closed = True
                    break
                received += chunk
            goaways = [f for f in h2_frames(received) if f[0] == 0x7]
            self.assertTrue(goaways, f"no GOAWAY among {h2_frames(received)}")
            self.assertNotEqual(goaways[-1][2], 0, "the GOAWAY carries no error code")
            self.assertTrue(closed, "the connection was still open 10 s after its GOAWAY")
        finally:
            sock.close()
        self.after_abuse("connection error")

    def test_rapid_reset(self):
        """20,000 streams opened and reset at once on one connection."""
        sock, conn = self.connect()
        request = self.frame(directory_pb2.CountEmployeesRequest().SerializeToString())
        try:
            for _ in range(20000):
                stream = conn.get_next_available_stream_id()
                conn.send_headers(stream, self.headers("/roster.v1.Directory/CountEmployees"))
                conn.send_data(stream, request, end_stream=True)
                conn.reset_stream(stream)
                data = conn.data_to_send()
                if data:
                    sock.sendall(data)
        except (OSError, h2.exceptions.ProtocolError):
            pass
        finally:
            sock.close()
        self.after_abuse("rapid reset")

    def test_window_zero_readers_of_pictures_and_pages(self):
        """Readers that never open their window, holding StreamEmployees and GetPicture, then gone."""
        socks = []
        for _ in range(8):
            sock, conn = self.connect(window=0)
            for method, message in (("/roster.v1.Directory/StreamEmployees", b""),
                                    ("/roster.v1.Pictures/GetPicture", b"")):
                stream = conn.get_next_available_stream_id()
                conn.send_headers(stream, self.headers(method))
                conn.send_data(stream, self.frame(message), end_stream=True)
            sock.sendall(conn.data_to_send())
            socks.append(sock)
        time.sleep(1)
        self.assertIsNone(SERVER.poll())
        for sock in socks:
            sock.close()
        self.after_abuse("window-0 readers")

    # --- HTTP/1.1 on the same port (the Connect protocol) -----------------------------------

    def http1(self, request):
        """Sends raw bytes on a new connection; the server's answer, read until it closes."""
        sock = socket.create_connection((HOST, PORT), timeout=HANG)
        try:
            sock.sendall(request)
            answer = b""
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                answer += chunk
            return answer
        finally:
            sock.close()

    def test_http1_lying_content_length(self):
        """A body that claims a gigabyte: read up to the request limit, refused with 429
        (resource_exhausted), the connection closed, memory bounded."""
        before = rss_mb()
        head = (f"POST /roster.v1.Directory/CreateEmployee HTTP/1.1\r\nhost: {HOST}\r\n"
                "content-type: application/json\r\ncontent-length: 1000000000\r\n\r\n").encode()
        sock = socket.create_connection((HOST, PORT), timeout=HANG)
        try:
            sock.sendall(head)
            answer = b""
            try:
                for _ in range(64):  # up to 64 MB, far past the 4 MiB limit
                    sock.sendall(b"x" * (1 << 20))
            except (BrokenPipeError, ConnectionResetError):
                pass
            try:
                while True:
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    answer += chunk
            except ConnectionResetError:
                pass
        finally:
            sock.close()
        self.assertTrue(answer.startswith(b"HTTP/1.1 429"), answer[:200])
        self.assertIn(b'"code":"resource_exhausted"', answer)
        print(f"abuse: HTTP/1.1 lying content-length; RSS {before:.0f} -> {rss_mb():.0f} MB", file=sys.stderr)
        self.after_abuse("HTTP/1.1 lying content-length")

    def test_http1_garbage_and_a_stalled_request(self):
        """Bytes that are neither HTTP/1.1 nor HTTP/2 get 400 and a closed connection; a
        request that stops half way and goes holds nothing."""
        answer = self.http1(b"\x16\x03\x01 hello, not HTTP at all\r\n\r\n")
        self.assertTrue(answer.startswith(b"HTTP/1.1 400"), answer[:200])
        stalled = socket.create_connection((HOST, PORT), timeout=HANG)
        stalled.sendall(b"POST /roster.v1.Directory/CountEmployees HTTP/1.1\r\ncontent-type: application/json\r\n"
                        b"content-length: 100\r\n\r\n{")
        stalled.close()
        answer = self.http1((f"POST /roster.v1.Directory/CountEmployees HTTP/1.1\r\nhost: {HOST}\r\n"
                             "content-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}")
                            .encode())
        self.assertTrue(answer.startswith(b"HTTP/1.1 200"), answer[:200])
        self.after_abuse("HTTP/1.1 garbage and a stalled request")

    def test_thousands_of_idle_http1_connections(self):
        socks = []
        request = (f"POST /grpc.health.v1.Health/Check HTTP/1.1\r\nhost: {HOST}\r\n"
                   "content-type: application/json\r\ncontent-length: 2\r\n\r\n{}").encode()
        try:
            for _ in range(1000):
                sock = socket.create_connection((HOST, PORT), timeout=HANG)
                sock.sendall(request)
                socks.append(sock)
            for sock in socks[:20]:
                self.assertTrue(sock.recv(4096).startswith(b"HTTP/1.1 200"))
            self.assertLess(rss_mb(), RSS_BOUND_MB)
            print(f"abuse: 1,000 kept-alive HTTP/1.1 connections: RSS {rss_mb():.0f} MB", file=sys.stderr)
        finally:
            for sock in socks:
                sock.close()
        self.after_abuse("1,000 idle HTTP/1.1 connections")

    def test_thousands_of_idle_connections(self):
        socks = []
        try:
            for _ in range(2000):
                sock, conn = self.connect()
                socks.append(sock)
            self.assertLess(rss_mb(), RSS_BOUND_MB)
            self.assertIsNotNone(health_p99(10))
        finally:
            for sock in socks:
                sock.close()
        self.after_abuse("2,000 idle connections")

    # --- The Connect protocol's streams (HTTP/1.1 and HTTP/2) --------------------------------

    @staticmethod
    def connect_headers(method):
        return [(":method", "POST"), (":scheme", "http"), (":path", method), (":authority", f"{HOST}:{PORT}"),
                ("content-type", "application/connect+json")]

    def test_connect_stream_clients_that_go_release_their_slots(self):
        """Connect WatchChanges and StreamEmployees, 20 over HTTP/1.1 connections and 20 on one
        HTTP/2 connection with window 0 (more than the per-client cap in all), then every
        socket closed, five times over. The watchers' heartbeats are an hour apart, so only the
        server noticing each client go can free their slots."""
        body = self.frame(json.dumps({"heartbeatInterval": "3600s"}).encode())
        for round in range(5):
            socks = []
            for index in range(20):
                method = "/roster.v1.Directory/" + ("WatchChanges" if index % 2 else "StreamEmployees")
                sock = socket.create_connection((HOST, PORT), timeout=HANG)
                sock.sendall((f"POST {method} HTTP/1.1\r\nhost: {HOST}\r\ncontent-type: application/connect+json\r\n"
                              f"content-length: {len(body)}\r\n\r\n").encode() + body)
                socks.append(sock)
            sock, conn = self.connect(window=0)
            socks.append(sock)
            for index in range(20):
                method = "/roster.v1.Directory/" + ("WatchChanges" if index % 2 else "StreamEmployees")
                stream = conn.get_next_available_stream_id()
                conn.send_headers(stream, self.connect_headers(method))
                conn.send_data(stream, body, end_stream=True)
            sock.sendall(conn.data_to_send())
            wait_for(f"round {round}: slots held",
                     lambda: (metric("roster_stream_slots_in_use") or 0) >= MAX_STREAMS_PER_CLIENT // 2)
            for sock in socks:
                sock.close()
            slots_released(f"round {round}")
        self.after_abuse("Connect stream clients that go")

    def test_connect_client_stream_lying_and_stalling(self):
        """A Connect client stream whose envelope claims a gigabyte is refused at once
        (resource_exhausted in the end-of-stream message) and changes nothing; one that stops
        half way through a message and closes holds nothing; one that floods envelopes faster
        than the server reads them is held back by flow control, its memory bounded."""
        sock, conn = self.connect()
        stream = conn.get_next_available_stream_id()
        conn.send_headers(stream, self.connect_headers("/roster.v1.Directory/UpsertEmployees"))
        conn.send_data(stream, struct.pack(">BI", 0, 1 << 30) + b"{" * 1000)
        sock.sendall(conn.data_to_send())
        reply = Reply()
        while not reply.done:
            self.pump(sock, conn, stream, reply)
        sock.close()
        self.assertEqual(reply.headers.get(":status"), "200", reply.headers)
        self.assertIn(b'"code":"resource_exhausted"', reply.data)

        stalled, conn = self.connect()
        stream = conn.get_next_available_stream_id()
        conn.send_headers(stream, self.connect_headers("/roster.v1.Directory/UpsertEmployees"))
        conn.send_data(stream, struct.pack(">BI", 0, 3 << 20) + b"x" * 16000)
        conn.send_data(stream, b"x" * 16000)
        stalled.sendall(conn.data_to_send())
        stalled.close()

        before = rss_mb()
        flood, conn = self.connect()
        stream = conn.get_next_available_stream_id()
        conn.send_headers(stream, self.connect_headers("/roster.v1.Directory/UpsertEmployees"))
        row = self.frame(json.dumps({"employees": [{"guid": "not-a-guid", "name": "x" * 900}]}).encode())
        sent, blocked = 0, False
        flood.settimeout(2)
        while sent < (64 << 20):
            window = min(conn.local_flow_control_window(stream), 16384)
            if window < len(row):
                # The server gives window back only as its handler reads: wait for it a while.
                try:
                    data = flood.recv(65536)
                except socket.timeout:
                    blocked = True
                    break
                for event in conn.receive_data(data):
                    pass
                flood.sendall(conn.data_to_send())
                continue
            count = window // len(row)
            conn.send_data(stream, row * count)
            sent += len(row) * count
            flood.sendall(conn.data_to_send())
        flood.close()
        print(f"abuse: Connect client-stream flood: {sent / 1e6:.1f} MB sent, blocked {blocked}; "
              f"RSS {before:.0f} -> {rss_mb():.0f} MB", file=sys.stderr)
        # Measured: about +20 MB, as the same flood over gRPC; +216 MB when messages the call
        # had read stayed queued.
        self.assertLess(rss_mb() - before, 60, "the server kept a flood it had read, or one it had not")
        self.after_abuse("Connect client stream lying, stalling and flooding")

    def test_slowly_framed_large_message(self):
        """A 3.9 MB message in 16 KB DATA frames, to the fast path's CreateEmployee and to the
        streaming UpsertEmployees, is read without the server's CPU growing with the square of
        its size (a name that long is refused, so nothing is written): the CPU it used is
        printed, and bounded only loosely (docs/performance.md has the benchmark)."""
        from roster.v1 import types_pb2
        employee = types_pb2.Employee(name="x" * (3900 << 10), department="Design")
        for method, message in (("CreateEmployee", directory_pb2.CreateEmployeeRequest(employee=employee)),
                                ("UpsertEmployees", directory_pb2.UpsertEmployeesRequest(employees=[employee]))):
            body = self.frame(message.SerializeToString())
            before = cpu_seconds()
            _, _, trailers, reset = self.call("/roster.v1.Directory/" + method, body)
            used = cpu_seconds() - before
            print(f"abuse: {len(body) / 1e6:.1f} MB {method} in 16 KB frames: {used * 1000:.0f} ms of server CPU; "
                  f"status {trailers.get('grpc-status')}", file=sys.stderr)
            if method == "CreateEmployee":
                self.assertEqual(trailers.get("grpc-status"), "3", (method, trailers, reset))
                self.assertIn("name", trailers.get("grpc-message", ""))
            else:
                # UpsertEmployees reports a refused row in its reply, and the call is OK.
                self.assertIn(trailers.get("grpc-status"), ("0", "3"), (method, trailers, reset))
        self.after_abuse("large message in small frames")


def h2_frames(data):
    """The server's frames in `data`, after its connection preface: (type, stream, error code
    of a GOAWAY or RST_STREAM, else None)."""
    frames, offset = [], 0
    while offset + 9 <= len(data):
        length = int.from_bytes(data[offset:offset + 3], "big")
        kind, stream = data[offset + 3], int.from_bytes(data[offset + 5:offset + 9], "big") & 0x7FFFFFFF
        payload = data[offset + 9:offset + 9 + length]
        code = None
        if kind == 0x7 and len(payload) >= 8:
            code = int.from_bytes(payload[4:8], "big")
        elif kind == 0x3 and len(payload) >= 4:
            code = int.from_bytes(payload[0:4], "big")
        frames.append((kind, stream, code))
        offset += 9 + length
    return frames


class Reply:
    def __init__(self):
        self.headers, self.data, self.trailers, self.reset, self.done = {}, b"", {}, None, False


def cpu_seconds():
    with open(f"/proc/{SERVER.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    unittest.main(verbosity=2)
