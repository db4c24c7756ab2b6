#!/usr/bin/env python3
"""The Connect protocol and gRPC-Web on Roster's port, checked by clients nobody here wrote:
`curl` (over HTTP/1.1 and HTTP/2 with prior knowledge), the Buf CLI's `buf curl` (PyPI `buf-bin`;
Connect, gRPC-Web and gRPC) and `sonora` (PyPI, gRPC-Web), against the built binary with a
tokens file and `--cors-origin`; `grpcio` checks that what a Connect call wrote is what a gRPC
call reads.

Usage: connect_test.py ROSTER_BINARY
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import urllib.parse

import grpc

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROSTER = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.join(ROOT, ".build/debug/roster")
WORK = tempfile.mkdtemp(prefix="roster-connect-")
HANG = 60
MAX_REQUEST_KIB = 64
ORIGIN = "https://console.example:8443"

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import rosterstubs  # noqa: E402
import servers  # noqa: E402

STUBS = rosterstubs.generate(WORK, ["types.proto", "directory.proto"])
from roster.v1 import directory_pb2, directory_pb2_grpc, types_pb2  # noqa: E402

SERVER = None
LOG = None
METRICS_URL = None
BASE = None
TARGET = None
TOKENS = {}


def setUpModule():
    global SERVER, LOG, BASE, TARGET, METRICS_URL
    TOKENS.update(servers.write_tokens(ROSTER, WORK, ("reader", "writer")))
    LOG = open(os.path.join(WORK, "server.log"), "w")
    SERVER = subprocess.Popen(
        [ROSTER, "serve", "--port", "0", "--db", os.path.join(WORK, "connect.sqlite"), "--seed-employees", "60",
         "--no-seed-pictures", "--seed-sales-per-employee", "0", "--tokens", os.path.join(WORK, "tokens"),
         "--max-request-kib", str(MAX_REQUEST_KIB), "--cors-origin", ORIGIN, "--metrics-port", "0"],
        stdout=subprocess.PIPE, stderr=LOG, text=True)
    for _ in range(2):
        line = SERVER.stdout.readline()
        if line.startswith("listening on "):
            TARGET = line.split()[-1]
            BASE = f"http://{TARGET}"
        elif line.startswith("metrics on "):
            METRICS_URL = line.split()[-1]
        else:
            raise RuntimeError("server did not start: " + open(os.path.join(WORK, "server.log")).read())


def tearDownModule():
    servers.stop(SERVER, LOG)
    shutil.rmtree(WORK, ignore_errors=True)


class Reply:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return f"HTTP {self.status} {self.headers} {self.body[:300]!r}"


def curl(path, body=None, method=None, headers=(), http2=False, token="reader", extra=()):
    """One request through curl: (status, headers by lower-case name, body bytes)."""
    command = ["curl", "-s", "-S", "-i", "--max-time", str(HANG)]
    if http2:
        command.append("--http2-prior-knowledge")
    if method:
        command += ["-X", method]
    if token:
        command += ["-H", f"authorization: Bearer {TOKENS[token]}"]
    for header in headers:
        command += ["-H", header]
    # The body from a file, not standard input: curl 7.88 then mostly sends it with the request's
    # HEADERS. When it sends HEADERS first (always from standard input; from a file too on a busy
    # machine), an answer that comes before its upload (a refusal: RFC 9113 §8.1 allows it) is
    # lost: curl waits out its timeout (curl issue 10433), or exits 92 when the server resets the
    # stream after it. Calls refused before their body is read go through `early_call`.
    with tempfile.NamedTemporaryFile(dir=WORK) as upload:
        if body is not None:
            upload.write(body if isinstance(body, bytes) else body.encode())
            upload.flush()
            command += ["--data-binary", "@" + upload.name]
        command += list(extra) + [BASE + path]
        raw = subprocess.run(command, capture_output=True, check=True, timeout=HANG).stdout
    head, _, rest = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    found = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        found[name.strip().lower()] = value.strip()
    return Reply(status, found, rest)


def post_json(path, message, headers=(), **kw):
    return curl(path, json.dumps(message), method="POST", headers=["content-type: application/json", *headers], **kw)


class ConnectWithCurl(unittest.TestCase):
    def some_employee(self):
        page = post_json("/roster.v1.Directory/ListEmployees", {"pageSize": 1})
        self.assertEqual(page.status, 200, page)
        return page.json()["employees"][0]

    def test_unary_json_over_http1_and_http2(self):
        for http2 in (False, True):
            page = post_json("/roster.v1.Directory/ListEmployees", {"pageSize": 3, "readMask": "name,department"},
                             http2=http2)
            self.assertEqual(page.status, 200, page)
            self.assertEqual(page.headers["content-type"], "application/json")
            employees = page.json()["employees"]
            self.assertEqual(len(employees), 3)
            self.assertEqual(set(employees[0]), {"name", "department"})
            self.assertTrue(page.json()["nextPageToken"])
            # int64 as a string, by the proto3 JSON mapping.
            count = post_json("/roster.v1.Directory/CountEmployees", {}, http2=http2)
            self.assertEqual(count.json(), {"count": "60"})

    def test_unary_proto(self):
        guid = self.some_employee()["guid"]
        request = directory_pb2.GetEmployeeRequest(guid=guid).SerializeToString()
        for http2 in (False, True):
            reply = curl("/roster.v1.Directory/GetEmployee", request, method="POST",
                         headers=["content-type: application/proto"], http2=http2)
            self.assertEqual(reply.status, 200, reply)
            self.assertEqual(reply.headers["content-type"], "application/proto")
            self.assertEqual(types_pb2.Employee.FromString(reply.body).guid, guid)

    def test_get_with_etag_and_304(self):
        guid = self.some_employee()["guid"]
        query = urllib.parse.urlencode({"encoding": "json", "message": json.dumps({"guid": guid})})
        first = curl("/roster.v1.Directory/GetEmployee?" + query)
        self.assertEqual(first.status, 200, first)
        self.assertEqual(first.json()["guid"], guid)
        etag = first.headers["etag"]
        again = curl("/roster.v1.Directory/GetEmployee?" + query)
        self.assertEqual(again.headers["etag"], etag, "the same reply must carry the same ETag")
        self.assertEqual(again.body, first.body)
        unchanged = curl("/roster.v1.Directory/GetEmployee?" + query, headers=[f"if-none-match: {etag}"])
        self.assertEqual(unchanged.status, 304, unchanged)
        self.assertEqual(unchanged.body, b"")
        # The proto encoding, base64url in the query, over HTTP/2.
        import base64
        message = base64.urlsafe_b64encode(directory_pb2.GetEmployeeRequest(guid=guid).SerializeToString())
        proto = curl("/roster.v1.Directory/GetEmployee?encoding=proto&base64=1&message=" +
                     message.decode().rstrip("="), http2=True)
        self.assertEqual(proto.status, 200, proto)
        self.assertEqual(types_pb2.Employee.FromString(proto.body).guid, guid)

    def test_a_write_over_connect_is_read_over_grpc(self):
        created = post_json("/roster.v1.Directory/CreateEmployee",
                            {"employee": {"name": "Connect Person", "department": "Engineering",
                                          "email": "connect.person@example.com", "startDate": "2026-11-26"}}, token="writer")
        self.assertEqual(created.status, 200, created)
        guid = created.json()["guid"]
        with grpc.insecure_channel(TARGET) as channel:
            stub = directory_pb2_grpc.DirectoryStub(channel)
            employee = stub.GetEmployee(directory_pb2.GetEmployeeRequest(guid=guid), timeout=HANG,
                                        metadata=[("authorization", f"Bearer {TOKENS['reader']}")])
        self.assertEqual(employee.name, "Connect Person")
        deleted = post_json("/roster.v1.Directory/DeleteEmployee", {"guid": guid}, token="writer")
        self.assertEqual(deleted.status, 200, deleted)

    def assert_error(self, reply, status, code, mentioning=""):
        self.assertEqual(reply.status, status, reply)
        self.assertEqual(reply.headers.get("content-type"), "application/json", reply)
        body = reply.json()
        self.assertEqual(body["code"], code, reply)
        self.assertIn(mentioning, body.get("message", ""), reply)

    def test_errors_by_the_connect_table(self):
        get = "/roster.v1.Directory/GetEmployee"
        missing = "00000000-0000-4000-8000-000000000000"
        for http2 in (False, True):
            self.assert_error(post_json(get, {"guid": missing}, http2=http2), 404, "not_found")
            self.assert_error(post_json(get, {"guid": "nope"}, http2=http2), 400, "invalid_argument", "guid")
            self.assert_error(post_json(get, {"guid": missing}, token=None, http2=http2), 401, "unauthenticated")
            self.assert_error(post_json("/roster.v1.Directory/DeleteEmployee", {"guid": missing}, http2=http2),
                              403, "permission_denied")
            self.assert_error(curl(get, "{\"guid\": ", method="POST", headers=["content-type: application/json"],
                                   http2=http2), 400, "invalid_argument", "JSON")
            # A value of the wrong type: the field named, and a google.rpc.BadRequest detail.
            wrong = post_json("/roster.v1.Directory/ListEmployees", {"pageSize": "many"}, http2=http2)
            self.assert_error(wrong, 400, "invalid_argument", "pageSize")
            self.assertEqual([d["type"] for d in wrong.json()["details"]], ["google.rpc.BadRequest"], wrong)
            self.assert_error(curl(get, "x", method="POST", headers=["content-type: text/plain"], http2=http2),
                              415, "unimplemented", "application/json")
            self.assert_error(curl(get, method="PUT", http2=http2), 405, "unimplemented", "POST")
            self.assert_error(curl("/roster.v1.Directory/DeleteEmployee?encoding=json&message=%7B%7D", http2=http2),
                              405, "unimplemented", "side effects")
            self.assert_error(post_json("/roster.v1.Directory/Nope", {}, http2=http2), 404, "unimplemented",
                              "no method")
            self.assert_error(post_json("/roster.v1.Directory/StreamEmployees", {}, http2=http2), 415,
                              "unimplemented", "application/connect+json")
            reflection = post_json("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", {}, http2=http2)
            if http2:
                self.assert_error(reflection, 415, "unimplemented", "application/connect+json")
            else:
                self.assert_error(reflection, 505, "unimplemented", "HTTP/2")
            self.assert_error(post_json(get, {"guid": missing}, headers=["connect-timeout-ms: soon"], http2=http2),
                              400, "invalid_argument", "connect-timeout-ms")
            self.assert_error(post_json("/roster.v1.Directory/CountEmployees", {}, headers=["connect-timeout-ms: 0"],
                                        http2=http2), 504, "deadline_exceeded", "deadline")
            self.assert_error(post_json(get, {"guid": "x" * (MAX_REQUEST_KIB * 1024)}, http2=http2), 429,
                              "resource_exhausted", "limit")

    def test_the_same_interceptors_count_the_calls(self):
        """The metrics interceptor counts Connect calls by method and status, as gRPC's; the
        gRPC fast path's own counter does not."""
        import urllib.request

        def scrape():
            with urllib.request.urlopen(METRICS_URL, timeout=HANG) as response:
                text = response.read().decode()
            return {line.rpartition(" ")[0]: float(line.rpartition(" ")[2])
                    for line in text.splitlines() if line and not line.startswith("#")}
        ok = 'roster_rpc_requests_total{method="roster.v1.Directory/CountEmployees",status="OK"}'
        bad = 'roster_rpc_requests_total{method="roster.v1.Directory/GetEmployee",status="INVALID_ARGUMENT"}'
        fast = 'roster_unary_fast_path_total{path="fast"}'
        before = scrape()
        post_json("/roster.v1.Directory/CountEmployees", {})
        post_json("/roster.v1.Directory/GetEmployee", {"guid": "nope"})
        after = scrape()
        self.assertEqual(after.get(ok, 0) - before.get(ok, 0), 1)
        self.assertEqual(after.get(bad, 0) - before.get(bad, 0), 1)
        self.assertEqual(after.get(fast, 0), before.get(fast, 0))

    def test_gzip_both_ways(self):
        """A gzip request body is inflated; a reply of 1 KiB or more comes back in gzip when the
        client accepts it (curl --compressed), smaller ones and others plain; a zip bomb is
        refused within the request limit."""
        import gzip
        body = gzip.compress(json.dumps({"pageSize": 50}).encode())
        for http2 in (False, True):
            page = curl("/roster.v1.Directory/ListEmployees", body, method="POST", http2=http2,
                        headers=["content-type: application/json", "content-encoding: gzip"], extra=["--compressed"])
            self.assertEqual(page.status, 200, page)
            self.assertEqual(page.headers.get("content-encoding"), "gzip", page)
            self.assertEqual(len(json.loads(page.body)["employees"]), 50)
            small = post_json("/roster.v1.Directory/CountEmployees", {}, extra=["--compressed"], http2=http2)
            self.assertNotIn("content-encoding", small.headers)
            plain = post_json("/roster.v1.Directory/ListEmployees", {"pageSize": 50}, http2=http2)
            self.assertNotIn("content-encoding", plain.headers)
        bomb = gzip.compress(b" " * (MAX_REQUEST_KIB * 1024 * 64))
        refused = curl("/roster.v1.Directory/ListEmployees", bomb, method="POST",
                       headers=["content-type: application/json", "content-encoding: gzip"])
        self.assertEqual(refused.status, 429, refused)
        self.assertIn("inflates past the limit", refused.json()["message"])
        self.assert_error(curl("/roster.v1.Directory/CountEmployees", b"{}", method="POST",
                               headers=["content-type: application/json", "content-encoding: br"]),
                          501, "unimplemented", "gzip")

    def test_a_failed_write_changes_nothing(self):
        before = post_json("/roster.v1.Directory/CountEmployees", {}).json()
        self.assert_error(post_json("/roster.v1.Directory/CreateEmployee", {"employee": {"name": ""}},
                                    token="writer"), 400, "invalid_argument")
        self.assertEqual(post_json("/roster.v1.Directory/CountEmployees", {}).json(), before)

    def test_keep_alive_carries_several_requests(self):
        path = BASE + "/roster.v1.Directory/CountEmployees"
        out = subprocess.run(
            ["curl", "-s", "-S", "-v", "--max-time", str(HANG), "-H", "content-type: application/json",
             "-H", f"authorization: Bearer {TOKENS['reader']}", "--data", "{}", path, "--next",
             "-H", "content-type: application/json", "-H", f"authorization: Bearer {TOKENS['reader']}",
             "--data", "{}", path], capture_output=True, text=True, check=True, timeout=HANG)
        self.assertEqual(out.stdout, '{"count":"60"}' * 2)
        self.assertIn("Re-using existing connection", out.stderr)


class CORS(unittest.TestCase):
    """--cors-origin: preflights and replies for an allowed origin, nothing for another."""

    def preflight(self, origin, http2=False):
        return curl("/roster.v1.Directory/ListEmployees", method="OPTIONS", token=None, http2=http2,
                    headers=[f"origin: {origin}", "access-control-request-method: POST",
                             "access-control-request-headers: authorization, content-type"])

    def test_preflight(self):
        for http2 in (False, True):
            allowed = self.preflight(ORIGIN, http2=http2)
            self.assertEqual(allowed.status, 204, allowed)
            self.assertEqual(allowed.headers["access-control-allow-origin"], ORIGIN)
            self.assertEqual(allowed.headers["access-control-allow-credentials"], "true")
            self.assertIn("POST", allowed.headers["access-control-allow-methods"])
            self.assertIn("authorization", allowed.headers["access-control-allow-headers"])
            self.assertIn("connect-protocol-version", allowed.headers["access-control-allow-headers"])
            self.assertTrue(int(allowed.headers["access-control-max-age"]) > 0)
            refused = self.preflight("https://elsewhere.example", http2=http2)
            self.assertEqual(refused.status, 403, refused)
            self.assertNotIn("access-control-allow-origin", refused.headers)

    def test_replies_to_an_allowed_origin_only(self):
        reply = post_json("/roster.v1.Directory/CountEmployees", {}, headers=[f"origin: {ORIGIN}"])
        self.assertEqual(reply.status, 200, reply)
        self.assertEqual(reply.headers["access-control-allow-origin"], ORIGIN)
        self.assertIn("grpc-status", reply.headers["access-control-expose-headers"])
        error = post_json("/roster.v1.Directory/GetEmployee", {"guid": "nope"}, headers=[f"origin: {ORIGIN}"])
        self.assertEqual(error.headers["access-control-allow-origin"], ORIGIN, error)
        other = post_json("/roster.v1.Directory/CountEmployees", {}, headers=["origin: https://elsewhere.example"])
        self.assertEqual(other.status, 200, other)
        self.assertNotIn("access-control-allow-origin", other.headers)

    def test_bad_origins_stop_serve(self):
        for origins, mentioning in ((["*", ORIGIN], "give it alone"), (["console.example"], "not an origin"),
                                    (["https://console.example/app"], "no path")):
            args = [ROSTER, "serve", "--port", "0", "--db", os.path.join(WORK, "never.sqlite")]
            for origin in origins:
                args += ["--cors-origin", origin]
            out = subprocess.run(args, capture_output=True, text=True, timeout=HANG)
            self.assertNotEqual(out.returncode, 0, origins)
            self.assertIn(mentioning, out.stderr, origins)


class OverTLS(unittest.TestCase):
    """With TLS, the HTTP version is ALPN's: curl offering only http/1.1, or h2, gets a Connect
    reply over that version; grpcio, over h2, gets gRPC on the same port."""

    def test_alpn_picks_the_version(self):
        tls = os.path.join(WORK, "tls")
        os.makedirs(tls, exist_ok=True)
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", os.path.join(tls, "key.pem"), "-out", os.path.join(tls, "cert.pem")],
                       check=True, capture_output=True, timeout=HANG)
        log = open(os.path.join(WORK, "tls.log"), "w")
        server = subprocess.Popen(
            [ROSTER, "serve", "--port", "0", "--db", os.path.join(WORK, "tls.sqlite"), "--seed-employees", "5",
             "--no-seed-pictures", "--tls-cert", os.path.join(tls, "cert.pem"),
             "--tls-key", os.path.join(tls, "key.pem")], stdout=subprocess.PIPE, stderr=log, text=True)
        try:
            address = server.stdout.readline().split()[-1]
            for flag, version in (("--http1.1", "HTTP/1.1 200"), ("--http2", "HTTP/2 200")):
                out = subprocess.run(
                    ["curl", "-s", "-S", "-i", "--max-time", str(HANG), flag, "--cacert", os.path.join(tls, "cert.pem"),
                     "-H", "content-type: application/json", "-d", "{}",
                     f"https://{address}/roster.v1.Directory/CountEmployees"],
                    capture_output=True, check=True, timeout=HANG).stdout
                self.assertTrue(out.startswith(version.encode()), (flag, out[:80]))
                self.assertIn(b'{"count":"5"}', out)
            with open(os.path.join(tls, "cert.pem"), "rb") as pem:
                credentials = grpc.ssl_channel_credentials(pem.read())
            with grpc.secure_channel(address, credentials) as channel:
                count = directory_pb2_grpc.DirectoryStub(channel).CountEmployees(
                    directory_pb2.CountEmployeesRequest(), timeout=HANG)
            self.assertEqual(count.count, 5)
        finally:
            servers.stop(server, log)


class IdleHTTP1Connections(unittest.TestCase):
    def test_an_idle_keep_alive_connection_is_closed(self):
        """--max-idle-s closes an HTTP/1.1 connection kept alive after its call, as it closes
        an idle HTTP/2 one (the wait is a hang guard, never a bound on the time)."""
        import socket
        server = subprocess.Popen(
            [ROSTER, "serve", "--port", "0", "--db", os.path.join(WORK, "idle.sqlite"), "--seed-employees", "1",
             "--no-seed-pictures", "--max-idle-s", "1"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            host, port = server.stdout.readline().split()[-1].rsplit(":", 1)
            sock = socket.create_connection((host, int(port)), timeout=HANG)
            sock.sendall(b"POST /grpc.health.v1.Health/Check HTTP/1.1\r\nhost: x\r\n"
                         b"content-type: application/json\r\ncontent-length: 2\r\n\r\n{}")
            answer = b""
            while True:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                answer += chunk
            sock.close()
            self.assertTrue(answer.startswith(b"HTTP/1.1 200"), answer[:100])
        finally:
            servers.stop(server)


def envelope(message, flags=0):
    """One Connect or gRPC-Web envelope: flags, length, the message (bytes, or JSON from a dict)."""
    import struct
    if isinstance(message, dict):
        message = json.dumps(message).encode()
    return struct.pack(">BI", flags, len(message)) + message


def envelopes(body):
    """A streamed body's envelopes, as (flags, bytes); fails on a partial one."""
    import struct
    out = []
    while body:
        flags, length = struct.unpack(">BI", body[:5])
        assert len(body) >= 5 + length, f"a partial envelope: {body[:40]!r}"
        out.append((flags, body[5:5 + length]))
        body = body[5 + length:]
    return out


def stream_call(path, body, content_type="application/connect+json", headers=(), **kw):
    return curl(path, body, method="POST", headers=[f"content-type: {content_type}", *headers], **kw)


def early_call(path, body, http2, headers=(), token="reader"):
    """A streamed Connect call that may be answered before its body is read (a refusal): over
    HTTP/2 through python's h2 with the body sent with the headers (`servers.h2_post`: curl 7.88
    stalls on such an answer), over HTTP/1.1 through curl."""
    if not http2:
        return stream_call(path, body, headers=headers, token=token)
    pairs = [("content-type", "application/connect+json")]
    pairs += [tuple(part.strip() for part in header.split(":", 1)) for header in headers]
    if token:
        pairs.append(("authorization", f"Bearer {TOKENS[token]}"))
    return Reply(*servers.h2_post(BASE, path, body, pairs, HANG))


class ConnectStreamsWithCurl(unittest.TestCase):
    """The Connect protocol's streams, read envelope by envelope."""

    def end_of_stream(self, reply):
        self.assertEqual(reply.status, 200, reply)
        frames = envelopes(reply.body)
        self.assertTrue(frames, reply)
        self.assertEqual(frames[-1][0], 0x02, f"the last envelope ends the stream: {frames[-1]!r}")
        self.assertTrue(all(flags in (0, 1) for flags, _ in frames[:-1]), reply)
        return frames[:-1], json.loads(frames[-1][1])

    def test_server_stream_over_http1_and_http2(self):
        for http2 in (False, True):
            reply = stream_call("/roster.v1.Directory/StreamEmployees",
                                envelope({"pageSize": 7, "readMask": "name"}), http2=http2)
            self.assertEqual(reply.headers["content-type"], "application/connect+json")
            messages, end = self.end_of_stream(reply)
            self.assertEqual(end, {}, "a stream that ended well has no error")
            pages = [json.loads(body) for _, body in messages]
            self.assertEqual(len(pages), 9, "60 employees in pages of 7")
            self.assertEqual(sum(len(page["employees"]) for page in pages), 60)
            self.assertEqual(set(pages[0]["employees"][0]), {"name"})

    def test_proto_and_gzip_both_ways(self):
        import gzip
        request = directory_pb2.ListEmployeesRequest(page_size=60).SerializeToString()
        reply = stream_call("/roster.v1.Directory/StreamEmployees", envelope(gzip.compress(request), flags=1),
                            content_type="application/connect+proto",
                            headers=["connect-content-encoding: gzip", "connect-accept-encoding: gzip"], http2=True)
        self.assertEqual(reply.headers.get("connect-content-encoding"), "gzip", reply)
        messages, end = self.end_of_stream(reply)
        self.assertEqual(end, {})
        self.assertEqual([flags for flags, _ in messages], [1], "one page of 60, large enough to compress")
        page = directory_pb2.EmployeePage.FromString(gzip.decompress(messages[0][1]))
        self.assertEqual(len(page.employees), 60)

    def test_client_stream_over_http1_and_http2(self):
        import uuid
        for http2 in (False, True):
            guids = [str(uuid.uuid4()) for _ in range(3)]
            body = b"".join(envelope({"employees": [{"guid": guid, "name": f"Streamed {index}", "department": "Sales",
                                                      "email": f"streamed.{guid[:8]}@example.com",
                                                      "startDate": "2026-11-26"}]})
                            for index, guid in enumerate(guids))
            reply = stream_call("/roster.v1.Directory/UpsertEmployees", body, token="writer", http2=http2)
            messages, end = self.end_of_stream(reply)
            self.assertEqual(end, {}, reply)
            self.assertEqual(json.loads(messages[0][1]).get("inserted"), "3", reply)
            for guid in guids:
                self.assertEqual(post_json("/roster.v1.Directory/DeleteEmployee", {"guid": guid},
                                           token="writer").status, 200)

    def test_errors_end_the_stream(self):
        path = "/roster.v1.Directory/StreamEmployees"
        for http2 in (False, True):
            _, end = self.end_of_stream(early_call(path, b"\0\0\0\0\x05{bad}", http2))
            self.assertEqual(end["error"]["code"], "invalid_argument", end)
            _, end = self.end_of_stream(early_call(path, envelope({"readMask": 7}), http2))
            self.assertIn("readMask", end["error"]["message"], end)
            self.assertEqual(end["error"]["details"][0]["type"], "google.rpc.BadRequest", end)
            _, end = self.end_of_stream(early_call(path, envelope({}), http2, token=None))
            self.assertEqual(end["error"]["code"], "unauthenticated", end)
            _, end = self.end_of_stream(early_call(path, b"\0\x40\0\0\0" + b"x" * 100, http2))
            self.assertEqual(end["error"]["code"], "resource_exhausted", end)
            _, end = self.end_of_stream(early_call(path, envelope({}, flags=2), http2))
            self.assertEqual(end["error"]["code"], "invalid_argument", end)
            _, end = self.end_of_stream(early_call(path, envelope({"pageSize": 3})[:9], http2))
            self.assertEqual(end["error"]["code"], "invalid_argument", end)
            _, end = self.end_of_stream(early_call("/roster.v1.Directory/WatchChanges", envelope({}), http2,
                                                   headers=["connect-timeout-ms: 300"]))
            self.assertEqual(end["error"]["code"], "deadline_exceeded", end)
            refused = early_call("/roster.v1.Directory/Nope", envelope({}), http2)
            self.assertEqual((refused.status, refused.json()["code"]), (404, "unimplemented"), refused)
            refused = early_call("/roster.v1.Directory/GetEmployee", envelope({}), http2)
            self.assertEqual(refused.status, 415, refused)
            refused = curl(path, method="GET", headers=["content-type: application/connect+json"], http2=http2)
            self.assertEqual(refused.status, 405, refused)
            refused = early_call("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
                                 envelope({"listServices": ""}), http2)
            if http2:
                messages, end = self.end_of_stream(refused)
                self.assertIn("roster.v1.Directory", messages[0][1].decode())
            else:
                self.assertEqual(refused.status, 505, refused)

    def test_watch_changes_flushes_heartbeats_and_changes(self):
        """Over HTTP/1.1 (chunked) and HTTP/2: each message arrives as it is written, a
        heartbeat on a quiet stream, then a change made over gRPC."""
        for http2 in (False, True):
            command = ["curl", "-s", "-N", "--max-time", str(HANG), "-H", f"authorization: Bearer {TOKENS['reader']}",
                       "-H", "content-type: application/connect+json", "--data-binary", "@-",
                       "--http2-prior-knowledge" if http2 else "--http1.1",
                       BASE + "/roster.v1.Directory/WatchChanges"]
            watcher = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            try:
                watcher.stdin.write(envelope({"heartbeatInterval": "1s"}))
                watcher.stdin.close()

                def read_message():
                    import struct
                    head = watcher.stdout.read(5)
                    self.assertEqual(len(head), 5, "the stream ended early")
                    flags, length = struct.unpack(">BI", head)
                    return flags, json.loads(watcher.stdout.read(length))

                flags, heartbeat = read_message()
                self.assertEqual((flags, heartbeat.get("heartbeat")), (0, True), heartbeat)
                created = post_json("/roster.v1.Directory/CreateEmployee",
                                    {"employee": {"name": "Watched Person", "department": "Sales",
                                                  "email": "watched.person@example.com", "startDate": "2026-11-26"}},
                                    token="writer")
                guid = created.json()["guid"]
                while True:
                    flags, event = read_message()
                    if not event.get("heartbeat"):
                        break
                self.assertEqual((event["guid"], event["kind"]), (guid, "CHANGE_KIND_INSERTED"), event)
                self.assertEqual(post_json("/roster.v1.Directory/DeleteEmployee", {"guid": guid},
                                           token="writer").status, 200)
            finally:
                watcher.kill()
                watcher.wait()
                watcher.stdout.close()


class EarlyAnswers(unittest.TestCase):
    """A streamed call answered before its request ends (here: refused for want of a token) is
    ended; a client that keeps its request open is then reset with NO_ERROR (RFC 9113 §8.1),
    after a short drain: it stops sending, the stream's state goes, and the connection serves on.
    (A client that finishes its short upload meanwhile is not reset: curl 7.88 reports a reset
    that comes before its upload ends as an error.)"""

    def test_reset_with_no_error_after_the_whole_answer(self):
        import socket
        import h2.config
        import h2.connection
        import h2.errors
        import h2.events
        host, port = TARGET.rsplit(":", 1)
        connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        connection.initiate_connection()

        def headers(path, token=None, content_type="application/connect+json"):
            found = [(":method", "POST"), (":path", path), (":scheme", "http"), (":authority", TARGET),
                     ("content-type", content_type)]
            return found + ([("authorization", f"Bearer {TOKENS[token]}")] if token else [])

        # The request's body is never sent: the answer cannot wait for it.
        connection.send_headers(1, headers("/roster.v1.Directory/StreamEmployees"))
        events = []
        with socket.create_connection((host, int(port)), timeout=HANG) as sock:
            sock.sendall(connection.data_to_send())
            while not any(isinstance(e, (h2.events.StreamReset, h2.events.ConnectionTerminated)) for e in events):
                chunk = sock.recv(65536)
                self.assertTrue(chunk, f"the connection closed: {events}")
                events += connection.receive_data(chunk)
                sock.sendall(connection.data_to_send())
            kinds = [type(e).__name__ for e in events if getattr(e, "stream_id", None) == 1]
            self.assertEqual(kinds[-2:], ["StreamEnded", "StreamReset"], kinds)
            reset = events[-1]
            self.assertEqual(reset.error_code, h2.errors.ErrorCodes.NO_ERROR, reset)
            body = b"".join(e.data for e in events if isinstance(e, h2.events.DataReceived))
            frames = envelopes(body)
            self.assertEqual(json.loads(frames[-1][1])["error"]["code"], "unauthenticated", frames)

            # The same connection answers the next call.
            connection.send_headers(3, headers("/roster.v1.Directory/CountEmployees", "reader", "application/json"))
            connection.send_data(3, b"{}", end_stream=True)
            sock.sendall(connection.data_to_send())
            reply, ended = b"", False
            while not ended:
                chunk = sock.recv(65536)
                self.assertTrue(chunk, "the connection closed")
                for event in connection.receive_data(chunk):
                    if isinstance(event, h2.events.DataReceived) and event.stream_id == 3:
                        reply += event.data
                    ended = ended or (isinstance(event, h2.events.StreamEnded) and event.stream_id == 3)
                sock.sendall(connection.data_to_send())
            self.assertEqual(json.loads(reply).get("count"), "60", reply)


class ConnectWithBufCurl(unittest.TestCase):
    """The Buf CLI's client, which reads the schema from Protos/ (buf.yaml)."""

    def buf_curl(self, method, data, *flags):
        buf = shutil.which("buf") or os.path.join(os.path.dirname(sys.executable), "buf")
        return subprocess.run(
            [buf, "curl", "--schema", os.path.join(ROOT, "Protos"), "-H",
             f"authorization: Bearer {TOKENS['reader']}", "--data", json.dumps(data), *flags,
             f"{BASE}/roster.v1.Directory/{method}"],
            capture_output=True, text=True, timeout=HANG)

    def test_connect_over_http1_and_http2_and_grpc(self):
        for flags in (["--protocol", "connect"], ["--protocol", "connect", "--http2-prior-knowledge"],
                      ["--protocol", "grpcweb"], ["--protocol", "grpcweb", "--http2-prior-knowledge"],
                      ["--protocol", "grpc", "--http2-prior-knowledge"]):
            out = self.buf_curl("ListEmployees", {"page_size": 2}, *flags)
            self.assertEqual(out.returncode, 0, (flags, out.stderr))
            self.assertEqual(len(json.loads(out.stdout)["employees"]), 2, flags)

    def reflecting(self, path, data, *flags, token="reader"):
        """buf curl with the schema from the server's reflection (a bidirectional stream, so
        over HTTP/2)."""
        buf = shutil.which("buf") or os.path.join(os.path.dirname(sys.executable), "buf")
        command = [buf, "curl", "--http2-prior-knowledge", "-H", f"authorization: Bearer {TOKENS[token]}",
                   *flags]
        if data is not None:
            command += ["--data", data]
        return subprocess.run(command + [BASE + path], capture_output=True, text=True, timeout=HANG)

    def test_reflection_and_every_rpc_kind(self):
        import uuid
        for protocol in ("connect", "grpcweb", "grpc"):
            listed = self.reflecting("", None, "--protocol", protocol, "--list-methods")
            self.assertEqual(listed.returncode, 0, (protocol, listed.stderr))
            self.assertIn("roster.v1.Directory/StreamEmployees", listed.stdout.split())
            unary = self.reflecting("/roster.v1.Directory/CountEmployees", "{}", "--protocol", protocol)
            self.assertEqual(unary.returncode, 0, (protocol, unary.stderr))
            self.assertIn('"count"', unary.stdout)
            streamed = self.reflecting("/roster.v1.Directory/StreamEmployees", '{"pageSize": 25}',
                                       "--protocol", protocol)
            self.assertEqual(streamed.returncode, 0, (protocol, streamed.stderr))
            decoder = json.JSONDecoder()
            text, pages = streamed.stdout.strip(), []
            while text:
                page, end = decoder.raw_decode(text)
                pages.append(page)
                text = text[end:].strip()
            self.assertEqual([len(page["employees"]) for page in pages][:3], [25, 25, 10], protocol)
            guid = str(uuid.uuid4())
            rows = "\n".join(json.dumps({"employees": [{"guid": guid, "name": name, "department": "Sales",
                                                         "email": f"buf.{guid[:8]}@example.com",
                                                         "startDate": "2026-11-26"}]})
                             for name in ("Buf First", "Buf Second"))
            upserted = self.reflecting("/roster.v1.Directory/UpsertEmployees", rows, "--protocol", protocol,
                                       token="writer")
            self.assertEqual(upserted.returncode, 0, (protocol, upserted.stderr))
            self.assertEqual((json.loads(upserted.stdout).get("inserted"), json.loads(upserted.stdout).get("updated")),
                             ("1", "1"), upserted.stdout)
            self.assertEqual(post_json("/roster.v1.Directory/DeleteEmployee", {"guid": guid}, token="writer").status,
                             200)
            # A bidirectional stream, called by name: two requests, two answers.
            bidi = self.reflecting("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
                                   '{"listServices": ""}\n{"fileContainingSymbol": "roster.v1.Directory"}',
                                   "--protocol", protocol)
            self.assertEqual(bidi.returncode, 0, (protocol, bidi.stderr))
            self.assertIn('"listServicesResponse"', bidi.stdout)
            self.assertIn('"fileDescriptorResponse"', bidi.stdout)

    def test_streams_over_http1_from_the_schema(self):
        for protocol in ("connect", "grpcweb"):
            out = self.buf_curl("StreamEmployees", {"page_size": 40}, "--protocol", protocol)
            self.assertEqual(out.returncode, 0, (protocol, out.stderr))
            self.assertEqual(out.stdout.count('"guid"'), 60, protocol)

    def test_connect_error(self):
        for protocol in ("connect", "grpcweb"):
            out = self.buf_curl("GetEmployee", {"guid": "nope"}, "--protocol", protocol)
            self.assertNotEqual(out.returncode, 0)
            self.assertIn("invalid_argument", out.stderr, protocol)


class GRPCWebWithSonora(unittest.TestCase):
    """sonora (PyPI), a gRPC-Web client of its own, with grpcio's generated stubs."""

    def test_unary_and_an_error(self):
        import sonora.client
        def method(name, request, response):
            # The channel's own multicallables (grpcio's generated stubs pass an argument
            # sonora does not take).
            return channel.unary_unary(f"/roster.v1.Directory/{name}", request_serializer=request.SerializeToString,
                                       response_deserializer=response.FromString)

        with sonora.client.insecure_web_channel(BASE) as channel:
            auth = [("authorization", f"Bearer {TOKENS['reader']}")]
            page = method("ListEmployees", directory_pb2.ListEmployeesRequest, directory_pb2.ListEmployeesResponse)(
                directory_pb2.ListEmployeesRequest(page_size=4), metadata=auth, timeout=HANG)
            self.assertEqual(len(page.employees), 4)
            with self.assertRaises(grpc.RpcError) as refused:
                method("GetEmployee", directory_pb2.GetEmployeeRequest, types_pb2.Employee)(
                    directory_pb2.GetEmployeeRequest(guid="nope"), metadata=auth, timeout=HANG)
            self.assertEqual(refused.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
            with self.assertRaises(grpc.RpcError) as unauthenticated:
                method("CountEmployees", directory_pb2.CountEmployeesRequest, directory_pb2.CountEmployeesResponse)(
                    directory_pb2.CountEmployeesRequest(), timeout=HANG)
            self.assertEqual(unauthenticated.exception.code(), grpc.StatusCode.UNAUTHENTICATED)


class GRPCWebStreamsWithSonora(unittest.TestCase):
    def test_server_stream(self):
        import sonora.client
        with sonora.client.insecure_web_channel(BASE) as channel:
            stream = channel.unary_stream("/roster.v1.Directory/StreamEmployees",
                                          request_serializer=directory_pb2.ListEmployeesRequest.SerializeToString,
                                          response_deserializer=directory_pb2.EmployeePage.FromString)
            auth = [("authorization", f"Bearer {TOKENS['reader']}")]
            pages = list(stream(directory_pb2.ListEmployeesRequest(page_size=16), metadata=auth, timeout=HANG))
            self.assertEqual([len(page.employees) for page in pages], [16, 16, 16, 12])
            with self.assertRaises(grpc.RpcError) as refused:
                list(stream(directory_pb2.ListEmployeesRequest(page_size=-1), metadata=auth, timeout=HANG))
            self.assertEqual(refused.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)


class ConnectPythonClient(unittest.TestCase):
    """The connectrpc package (PyPI; connect-python), with grpcio-tools' google.protobuf
    messages through its compat codecs: the Connect protocol in JSON and proto, and gRPC-Web,
    over HTTP/1.1 and HTTP/2, on every RPC kind HTTP/1.1 can carry."""

    def clients(self):
        from connectrpc.client import ConnectClientSync
        from connectrpc.compat import google_protobuf_binary_codec, google_protobuf_json_codec
        from connectrpc.protocol import ProtocolType
        from pyqwest import HTTPVersion, SyncClient, SyncHTTPTransport
        for version in (HTTPVersion.HTTP1, HTTPVersion.HTTP2):
            http = SyncClient(SyncHTTPTransport(http_version=version))
            for protocol, codec in ((ProtocolType.CONNECT, google_protobuf_json_codec()),
                                    (ProtocolType.CONNECT, google_protobuf_binary_codec()),
                                    (ProtocolType.GRPC_WEB, google_protobuf_binary_codec())):
                label = f"{protocol.name} {codec.name()} {version}"
                yield label, ConnectClientSync(BASE, codec=codec, protocol=protocol, http_client=http,
                                               timeout_ms=HANG * 1000)

    @staticmethod
    def method(name, request, response, kind):
        from connectrpc.method import IdempotencyLevel, MethodInfo
        return MethodInfo(name=name, service_name="roster.v1.Directory", input=request, output=response,
                          idempotency_level=IdempotencyLevel.UNKNOWN, stream_type=kind)

    def test_every_kind(self):
        import uuid
        from connectrpc.errors import ConnectError
        from connectrpc.method import StreamType
        auth = {"authorization": f"Bearer {TOKENS['reader']}"}
        write = {"authorization": f"Bearer {TOKENS['writer']}"}
        count = self.method("CountEmployees", directory_pb2.CountEmployeesRequest,
                            directory_pb2.CountEmployeesResponse, StreamType.UNARY)
        get = self.method("GetEmployee", directory_pb2.GetEmployeeRequest, types_pb2.Employee, StreamType.UNARY)
        stream = self.method("StreamEmployees", directory_pb2.ListEmployeesRequest, directory_pb2.EmployeePage,
                             StreamType.SERVER_STREAM)
        upsert = self.method("UpsertEmployees", directory_pb2.UpsertEmployeesRequest,
                             directory_pb2.UpsertEmployeesResponse, StreamType.CLIENT_STREAM)
        for label, client in self.clients():
            with self.subTest(label):
                total = client.execute_unary(request=directory_pb2.CountEmployeesRequest(), method=count,
                                             headers=auth)
                self.assertEqual(total.count, 60)
                pages = list(client.execute_server_stream(request=directory_pb2.ListEmployeesRequest(page_size=22),
                                                          method=stream, headers=auth))
                self.assertEqual([len(page.employees) for page in pages], [22, 22, 16])
                guid = str(uuid.uuid4())
                rows = (directory_pb2.UpsertEmployeesRequest(employees=[types_pb2.Employee(
                    guid=guid, name=name, department="Sales", email=f"py.{guid[:8]}@example.com",
                    start_date="2026-11-26")])
                        for name in ("Py First", "Py Second"))
                merged = client.execute_client_stream(request=rows, method=upsert, headers=write)
                self.assertEqual((merged.inserted, merged.updated), (1, 1), merged)
                self.assertEqual(client.execute_unary(request=directory_pb2.GetEmployeeRequest(guid=guid), method=get,
                                                      headers=auth).name, "Py Second")
                with self.assertRaises(ConnectError) as refused:
                    client.execute_unary(request=directory_pb2.GetEmployeeRequest(guid="nope"), method=get,
                                         headers=auth)
                self.assertEqual(refused.exception.code.name, "INVALID_ARGUMENT")
                with self.assertRaises(ConnectError) as unauthenticated:
                    list(client.execute_server_stream(request=directory_pb2.ListEmployeesRequest(), method=stream))
                self.assertEqual(unauthenticated.exception.code.name, "UNAUTHENTICATED")
                self.assertEqual(post_json("/roster.v1.Directory/DeleteEmployee", {"guid": guid},
                                           token="writer").status, 200)


class GRPCWebText(unittest.TestCase):
    """application/grpc-web-text, the base64 form older grpc-web JavaScript clients send,
    through curl: frames and the trailer frame read by hand."""

    @staticmethod
    def frames(body):
        import struct
        out = []
        while body:
            flag, length = struct.unpack(">BI", body[:5])
            out.append((flag, body[5:5 + length]))
            body = body[5 + length:]
        return out

    def call(self, path, message, http2=False):
        import base64
        import struct
        framed = struct.pack(">BI", 0, len(message)) + message
        return curl(path, base64.b64encode(framed), method="POST", http2=http2,
                    headers=["content-type: application/grpc-web-text", "x-grpc-web: 1"])

    def test_unary_and_trailers(self):
        import base64
        for http2 in (False, True):
            reply = self.call("/roster.v1.Directory/CountEmployees",
                              directory_pb2.CountEmployeesRequest().SerializeToString(), http2=http2)
            self.assertEqual(reply.status, 200, reply)
            self.assertTrue(reply.headers["content-type"].startswith("application/grpc-web-text"))
            frames = self.frames(base64.b64decode(reply.body))
            self.assertEqual([flag for flag, _ in frames], [0, 0x80])
            self.assertEqual(directory_pb2.CountEmployeesResponse.FromString(frames[0][1]).count, 60)
            self.assertIn(b"grpc-status: 0", frames[1][1])

    def test_errors(self):
        import base64
        missing = directory_pb2.GetEmployeeRequest(guid="00000000-0000-4000-8000-000000000000")
        reply = self.call("/roster.v1.Directory/GetEmployee", missing.SerializeToString())
        frames = self.frames(base64.b64decode(reply.body)) if reply.body else []
        trailers = frames[-1][1].decode() if frames else "".join(f"{k}: {v}\r\n" for k, v in reply.headers.items())
        self.assertIn("grpc-status: 5", trailers, reply)
        # Refused before it began: trailers-only, the status in the headers.
        unknown = self.call("/roster.v1.Directory/Nope", b"")
        self.assertEqual(unknown.status, 200, unknown)
        self.assertEqual(unknown.headers.get("grpc-status"), "12", unknown)
        self.assertEqual(unknown.body, b"")


if __name__ == "__main__":
    unittest.main(verbosity=2)
