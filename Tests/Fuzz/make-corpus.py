#!/usr/bin/env python3
"""Writes the starting corpus of each fuzz target (Tests/Fuzz/corpus/TARGET/NAME), in the
layout each target reads (Tests/Fuzz/*Targets.swift): well-formed inputs for the fuzzer to
mutate, and the refusals worth reaching. Run again after changing a target's layout; inputs
the fuzzer found that crashed stay beside these as regressions (named crash-*)."""
import base64, gzip, json, os, struct, sys, zlib

import hpack

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    os.makedirs(os.path.join(root, target), exist_ok=True)
    with open(os.path.join(root, target, name), "wb") as f:
        f.write(data)


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def pieces(data, size=200):
    """The connection target's layout: each piece's length, its bytes, then a clock choice."""
    out = b""
    for i in range(0, len(data), size):
        piece = data[i : i + size]
        out += bytes([len(piece) - 1]) + piece + b"\x01"
    return out


def grpc(message, compressed=False):
    return bytes([1 if compressed else 0]) + struct.pack(">I", len(message)) + message


request = [
    (":method", "POST"), (":scheme", "http"), (":path", "/roster.v1.Directory/GetEmployee"),
    (":authority", "localhost"), ("content-type", "application/grpc"), ("te", "trailers"),
]
encoder = hpack.Encoder()
headers = encoder.encode(request)
put("connection", "unary", pieces(
    frame(1, 4, 1, headers) + frame(0, 1, 1, grpc(b"\n\x04abcd"))))
put("connection", "ping-settings-window", pieces(
    frame(6, 0, 0, b"12345678") + frame(4, 0, 0, struct.pack(">HI", 4, 65535))
    + frame(8, 0, 0, struct.pack(">I", 1000))))
put("connection", "reset-goaway", pieces(
    frame(1, 4, 1, headers) + frame(3, 0, 1, struct.pack(">I", 8))
    + frame(7, 0, 0, struct.pack(">II", 1, 0))))
put("connection", "continuation", pieces(
    frame(1, 0, 3, headers[:10]) + frame(9, 4, 3, headers[10:])))
put("connection", "bad-stream", pieces(frame(1, 4, 2, headers)))

fields = b"\x00".join(n.encode() + b"\x01" + v.encode() for n, v in request)
put("request-head", "request", b"\x00" + fields)
put("request-head", "trailers", b"\x01" + b"grpc-status\x010\x00grpc-message\x01ok")
put("request-head", "connection-header", b"\x00" + fields + b"\x00connection\x01close")

put("grpc-messages", "two", b"\x00\x10" + grpc(b"\n\x03abc") + grpc(b""))
put("grpc-messages", "gzip", b"\x01\x20" + grpc(gzip.compress(b"\n\x03abc" * 40), True))
put("grpc-messages", "deflate", b"\x02\x20" + grpc(zlib.compress(b"hello" * 50), True))
put("grpc-messages", "over-limit", b"\x00\x08" + grpc(b"x" * 1100))
put("grpc-messages", "bomb", b"\x01\x3f" + grpc(gzip.compress(b"\x00" * 100000), True))

put("envelopes", "binary", b"\x00" + b"\x09" + grpc(b'{"a":1}')[:10] + b"\x20" + grpc(b"") + bytes([2]) + b"\x00\x00\x00\x02{}")
put("envelopes", "text", b"\x01" + b"\x30" + base64.b64encode(grpc(b"\n\x03abc")) + b"\x10" + base64.b64encode(grpc(b"")))

put("get-query", "json", b"encoding=json&message=%7B%22guid%22%3A%22x%22%7D\x00\x0a\x01x")
put("get-query", "base64", b"encoding=proto&base64=1&message=CgF4&compression=identity\x00abc")
put("get-query", "bad", b"encoding=xml&message=%zz\x00")

put("json-request", "get", b"\x0d" + json.dumps({"guid": "5f0e6a3c-0000-4000-8000-000000000001"}).encode())
put("json-request", "list", b"\x11" + json.dumps({"pageSize": 50, "filter": {"department": "Sales", "nameContains": "ann"}, "readMask": "name,phone"}).encode())
put("json-request", "update", b"\x15" + json.dumps({"employee": {"guid": "x", "name": "Ann", "phone": "1"}, "updateMask": "phone", "expectedUpdateTime": "2026-01-01T00:00:00Z"}).encode())
put("json-request", "bad-field", b"\x11" + json.dumps({"pageSize": "many"}).encode())
put("json-request", "not-json", b"\x01{\"dateRange\":")

token = bytes([1]) + b"\x00" * 16 + struct.pack(">q", 42) + b"\x01" + struct.pack(">I", 3) + b"Ann"
put("tokens", "page", base64.urlsafe_b64encode(token).rstrip(b"=") + b"\x00" + b"\x01" * 16 + b"\x02ab\x00cd\x00" + b"xyz")
put("tokens", "change", b"12345\x00")

seed = [
    {"guid": "5f0e6a3c-0000-4000-8000-000000000001", "name": "Ann Lee", "department": "Sales",
     "title": "Clerk", "phone": "555-0100", "email": "ann@example.com", "active": True,
     "vacationDays": 12, "picture": "ann.jpg"},
    {"guid": "5f0e6a3c-0000-4000-8000-000000000002", "name": "Bo \u00d1u\u00f1ez \ud83d\ude00", "unknown": [1, {"a": None}]},
]
put("seed", "two", b"\x01" + json.dumps(seed, indent=1).encode())
put("seed", "empty", b"\x00[]")
put("seed", "escapes", b"\x02" + b'[{"guid":"a","name":"\\u00e9\\n\\"x\\"\\\\"}]')

put("sales-csv", "rows", b"\x01employee_guid,amount,date\n5f0e6a3c-0000-4000-8000-000000000001,12.50,2026-01-31\r\nx,-0.05,2025-12-01\n\nx,7,2024-02-29\n")
put("sales-csv", "bad", b"\x00x,1.234,2026-01-01\n")

# put-picture: a first byte (0: the client leaves at the end), then messages, each a kind
# (0: a header from choices, 1: a header of any text, 2-3: a piece of the real JPEG, 4: all of
# it, 5: any bytes) and its fields, then a byte (0: sent empty instead).
HEADER, WHOLE, PIECE, ANY = 0, 4, 2, 5
put("put-picture", "whole", bytes([1, HEADER, 0, 1, 1, 1, WHOLE, 1]))
put("put-picture", "pieces", bytes([1, HEADER, 0, 0, 0, 1]) + b"".join(bytes([PIECE, i * 8, 7, 1]) for i in range(12)) + bytes([PIECE, 96, 255, 1]))
put("put-picture", "unknown-employee", bytes([1, HEADER, 1, 1, 1, 1, WHOLE, 1]))
put("put-picture", "png-declared", bytes([1, HEADER, 0, 2, 0, 1, WHOLE, 1]))
put("put-picture", "wrong-size", bytes([1, HEADER, 0, 1, 3, 200, 3, 1, WHOLE, 1]))
put("put-picture", "twice", bytes([1, HEADER, 0, 1, 1, 1, HEADER, 0, 1, 1, 1, WHOLE, 1]))
put("put-picture", "chunk-first", bytes([1, WHOLE, 1, HEADER, 0, 1, 1, 1]))
put("put-picture", "too-large", bytes([1, HEADER, 0, 0, 0, 1]) + (bytes([ANY, 255]) + b"\xee" * 256 + b"\x01") * 12)
put("put-picture", "to-a-file", bytes([1, HEADER, 0, 0, 0, 1, WHOLE, 1, WHOLE, 1]))
put("put-picture", "empty-message", bytes([1, HEADER, 0, 1, 1, 1, WHOLE, 0]))
put("put-picture", "client-leaves", bytes([0, HEADER, 0, 1, 1, 1, WHOLE, 1]))
put("put-picture", "any-bytes", bytes([1, HEADER, 0, 1, 0, 1, ANY, 100]) + b"\xff\xd8\xff\xe0" + b"\x00" * 97 + b"\x01")
put("put-picture", "text-header", bytes([1, 1]) + b"fa220000-0000-4000-8000-000000000001\x00image/jpeg\x00\x00\x00\x01" + bytes([WHOLE, 1]))
