#!/usr/bin/env python3
"""Every method of every service, over every protocol Roster serves, answers as over gRPC.

The methods come from the descriptors the server serves (Protos/descriptors.pb: Roster's
services, grpc.health.v1 and both reflection services), never from a list written here. Each is called over gRPC (grpcio) and then, with the same request, over:

    connect+json and connect+proto, HTTP/1.1 (curl) and HTTP/2 (Python's h2)
    grpc-web+proto, HTTP/1.1 and HTTP/2 (unary and server streams: gRPC-Web has no others)

(Over HTTP/2 the request goes out whole in one write: curl 7.88 sends its body after the
headers, and when the answer comes first it either waits for ever or reports the server's
RST_STREAM NO_ERROR as an error, a race of its own this test would inherit.)

(bidirectional streams over Connect need HTTP/2). Each call is made three ways: with an admin
token and the empty request (for a stream: one empty message out, none in for a client
stream), which is bad input for every method that needs a key; without a token; and with a
body that does not decode. Each protocol must give the same messages as gRPC, or the same
status with the same message (for a body that does not decode, the same status: the decoders
word it their own way). The two never-ending streams (WatchChanges, Health.Watch) are left out:
tests/Interop/connect covers WatchChanges' stream over each protocol.

Usage: matrix_test.py ROSTER_BINARY
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import urllib.parse

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROSTER = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, ".build/debug/roster")
WORK = tempfile.mkdtemp(prefix="roster-matrix-")
TIMEOUT = 30

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import servers  # noqa: E402

NEVER_ENDING = {"/roster.v1.Directory/WatchChanges", "/grpc.health.v1.Health/Watch"}
# A length-delimited field 1 that promises 255 bytes and brings none.
UNDECODABLE = b"\x0a\xff\x01"


class Method:
    def __init__(self, service, method):
        self.path = f"/{service.full_name}/{method.name}"
        self.client_streaming = method.client_streaming
        self.server_streaming = method.server_streaming
        self.input = message_factory.GetMessageClass(method.input_type)
        self.output = message_factory.GetMessageClass(method.output_type)

    @property
    def unary(self):
        return not self.client_streaming and not self.server_streaming

    def __repr__(self):
        return self.path


def methods():
    files = descriptor_pb2.FileDescriptorSet()
    with open(os.path.join(ROOT, "Protos", "descriptors.pb"), "rb") as f:
        files.ParseFromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:  # dependencies first, as protoc writes them
        pool.Add(file)
    found = []
    for file in files.file:
        for service in pool.FindFileByName(file.name).services_by_name.values():
            for method in service.methods:
                if f"/{service.full_name}/{method.name}" not in NEVER_ENDING:
                    found.append(Method(service, method))
    return found


class Outcome:
    """What a call came to: the messages of a call that ended OK, or its status."""

    def __init__(self, code="ok", message="", replies=()):
        self.code, self.message, self.replies = code, message, list(replies)

    def same_as(self, other, wording):
        if self.code != other.code:
            return False
        if self.code == "ok":
            return self.replies == other.replies
        return self.message == other.message or not wording

    def __repr__(self):
        if self.code == "ok":
            return f"OK {[json_format.MessageToDict(m) for m in self.replies]}"[:400]
        return f"{self.code}: {self.message}"[:400]


# --- gRPC ---------------------------------------------------------------------------------

def grpc_call(channel, method, messages, token):
    metadata = [("authorization", f"Bearer {token}")] if token else []
    try:
        if method.unary:
            replies = [channel.unary_unary(method.path)(messages[0], metadata=metadata, timeout=TIMEOUT)]
        elif method.server_streaming and not method.client_streaming:
            replies = list(channel.unary_stream(method.path)(messages[0], metadata=metadata, timeout=TIMEOUT))
        elif method.client_streaming and not method.server_streaming:
            replies = [channel.stream_unary(method.path)(iter(messages), metadata=metadata, timeout=TIMEOUT)]
        else:
            replies = list(channel.stream_stream(method.path)(iter(messages), metadata=metadata, timeout=TIMEOUT))
    except grpc.RpcError as error:
        return Outcome(error.code().name.lower(), error.details() or "")
    return Outcome(replies=[method.output.FromString(r) for r in replies])


# --- HTTP through curl ----------------------------------------------------------------------

def post(base, path, body, content_type, token, http2):
    """POSTs `body`; returns (status, headers by lower-case name, body bytes)."""
    if not http2:
        return curl(base, path, body, content_type, token)
    headers = [("content-type", content_type)] + ([("authorization", f"Bearer {token}")] if token else [])
    return servers.h2_post(base, path, body, headers, TIMEOUT)


def curl(base, path, body, content_type, token):
    """POSTs `body` over HTTP/1.1; returns (status, headers by lower-case name, body bytes)."""
    request = os.path.join(WORK, "request")
    with open(request, "wb") as f:
        f.write(body)
    head, out = os.path.join(WORK, "head"), os.path.join(WORK, "out")
    command = ["curl", "-sS", "--max-time", str(TIMEOUT), "-X", "POST", "--data-binary", "@" + request,
               "-H", f"content-type: {content_type}", "-D", head, "-o", out]
    command += ["--http1.1"]
    if token:
        command += ["-H", f"authorization: Bearer {token}"]
    subprocess.run(command + [base + path], check=True, timeout=TIMEOUT + 10)
    headers, status = {}, 0
    with open(head, "rb") as f:
        for line in f.read().decode("latin-1").splitlines():
            if line.startswith("HTTP/"):
                status, headers = int(line.split()[1]), {}
            elif ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
    with open(out, "rb") as f:
        return status, headers, f.read()


def envelopes(body):
    """The (flags, payload) envelopes of a Connect or gRPC-Web body."""
    found, at = [], 0
    while at + 5 <= len(body):
        flags, length = body[at], struct.unpack(">I", body[at + 1:at + 5])[0]
        found.append((flags, body[at + 5:at + 5 + length]))
        at += 5 + length
    if at != len(body):
        raise AssertionError(f"a body that does not end at an envelope's end: {body[:200]!r}")
    return found


def envelope(payload, flags=0):
    return bytes([flags]) + struct.pack(">I", len(payload)) + payload


def connect_call(base, method, messages, token, http2, encoding):
    """A Connect call: unary as one message, streams as envelopes with an end-of-stream one."""
    def encode(message):
        if isinstance(message, bytes):
            return message
        return json.dumps(json_format.MessageToDict(message)).encode() if encoding == "json" else message.SerializeToString()

    def decode(payload):
        reply = method.output()
        if encoding == "json":
            json_format.Parse(payload.decode(), reply)
        else:
            reply.ParseFromString(payload)
        return reply

    if method.unary:
        status, headers, body = post(base, method.path, encode(messages[0]), f"application/{encoding}", token, http2)
        if status == 200:
            return Outcome(replies=[decode(body)])
        error = json.loads(body)
        return Outcome(error["code"], error.get("message", ""))
    request = b"".join(envelope(encode(m)) for m in messages)
    status, headers, body = post(base, method.path, request, f"application/connect+{encoding}", token, http2)
    if status != 200:
        error = json.loads(body)
        return Outcome(error["code"], error.get("message", ""))
    replies = []
    for flags, payload in envelopes(body):
        if flags & 0x02:
            end = json.loads(payload)
            if "error" in end:
                return Outcome(end["error"]["code"], end["error"].get("message", ""))
            return Outcome(replies=replies)
        replies.append(decode(payload))
    raise AssertionError(f"{method}: a Connect stream without its end-of-stream message: {body[:200]!r}")


GRPC_CODES = {code.value[0]: code.name.lower() for code in grpc.StatusCode}


def grpc_web_call(base, method, messages, token, http2):
    request = b"".join(envelope(m if isinstance(m, bytes) else m) for m in messages)
    status, headers, body = post(base, method.path, request, "application/grpc-web+proto", token, http2)
    if status != 200:
        raise AssertionError(f"{method}: gRPC-Web answered HTTP {status}: {body[:200]!r}")
    trailers = {name: value for name, value in headers.items() if name.startswith("grpc-")}
    replies = []
    for flags, payload in envelopes(body):
        if flags & 0x80:
            for line in payload.decode().split("\r\n"):
                if ":" in line:
                    name, value = line.split(":", 1)
                    trailers[name.strip().lower()] = value.strip()
        else:
            replies.append(method.output.FromString(payload))
    code = GRPC_CODES[int(trailers["grpc-status"])]
    if code != "ok":
        return Outcome(code, urllib.parse.unquote(trailers.get("grpc-message", "")))
    return Outcome(replies=replies)


# --- the matrix ---------------------------------------------------------------------------

def protocols(method):
    """(name, call) for every protocol that carries `method`'s kind of call."""
    found = []
    for http2 in (False, True):
        version = "HTTP/2" if http2 else "HTTP/1.1"
        if not (method.client_streaming and method.server_streaming) or http2:
            for encoding in ("json", "proto"):
                found.append((f"connect+{encoding} {version}",
                              lambda base, m, msgs, t, h=http2, e=encoding: connect_call(base, m, msgs, t, h, e)))
        if not method.client_streaming:
            found.append((f"grpc-web {version}", lambda base, m, msgs, t, h=http2: grpc_web_call(base, m, msgs, t, h)))
    return found


def requests(method, case):
    """The messages a call sends: for gRPC and binary encodings as bytes."""
    if case == "undecodable":
        return [UNDECODABLE]
    if method.client_streaming:
        return []
    return [method.input()]


def main():
    server = log = None
    try:
        tokens = servers.write_tokens(ROSTER, WORK, ("admin",))
        log = open(os.path.join(WORK, "server.log"), "w")
        server = subprocess.Popen(
            [ROSTER, "serve", "--port", "0", "--db", os.path.join(WORK, "matrix.sqlite"), "--seed-employees", "30",
             "--no-seed-pictures", "--seed-sales-per-employee", "3", "--tokens", os.path.join(WORK, "tokens"),
             "--no-log-requests"],
            stdout=subprocess.PIPE, stderr=log, text=True)
        line = server.stdout.readline()
        if not line.startswith("listening on "):
            raise SystemExit("the server did not start: " + open(os.path.join(WORK, "server.log")).read())
        target = line.split()[-1]
        base = f"http://{target}"
        found = methods()
        kinds = {(m.client_streaming, m.server_streaming) for m in found}
        if len(found) < 25 or len(kinds) != 4:
            raise SystemExit(f"the descriptors gave {len(found)} methods of {len(kinds)} kinds")
        failures, cells, statuses = [], 0, {}
        with grpc.insecure_channel(target) as channel:
            for method in found:
                for case in ("empty", "no token", "undecodable"):
                    token = None if case == "no token" else tokens["admin"]
                    messages = requests(method, case)
                    if case == "undecodable" and method.client_streaming and not messages:
                        continue
                    wire = [m if isinstance(m, bytes) else m.SerializeToString() for m in messages]
                    reference = grpc_call(channel, method, wire, token)
                    statuses[reference.code] = statuses.get(reference.code, 0) + 1
                    for name, call in protocols(method):
                        if case == "undecodable" and name.startswith("connect+json"):
                            sent = [b"{"]
                        elif name.startswith("connect+json"):
                            sent = messages
                        else:
                            sent = wire
                        cells += 1
                        try:
                            outcome = call(base, method, sent, token)
                        except Exception as error:  # noqa: BLE001: every failure is reported with its cell
                            failures.append(f"{method} {case} over {name}: {error!r}")
                            continue
                        if not outcome.same_as(reference, wording=case != "undecodable"):
                            failures.append(f"{method} {case} over {name}: {outcome!r}\n    gRPC: {reference!r}")
        print(f"matrix: {len(found)} methods, {cells} calls against gRPC's answers; gRPC's statuses: "
              + ", ".join(f"{code} {count}" for code, count in sorted(statuses.items())))
        if failures:
            print(f"matrix: {len(failures)} differ:\n" + "\n".join(failures), file=sys.stderr)
            raise SystemExit(1)
        print("matrix: every protocol answered as gRPC")
    finally:
        if server:
            servers.stop(server, log)
        shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()
