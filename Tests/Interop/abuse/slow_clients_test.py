#!/usr/bin/env python3
"""Roster against slow clients: the built binary, served with TLS, and raw sockets that send
slowly or not at all.

- An HTTP/1.1 client that sends its request head a byte at a time (slowloris) is dropped once
  the head has taken the head timeout (10 s), long before the idle time (set to an hour here);
  so is one that sends a quick request and then trickles the next.
- A keep-alive HTTP/1.1 connection that sends nothing after its response is not dropped by
  the head timeout.
- A client that opens a TCP connection and stalls in the TLS handshake (nothing, or a
  ClientHello a byte at a time) is dropped after the version timeout (30 s).
- While a hundred such clients are held, another client is served.

Each bound is asserted as "closed, and not before the timeout nor long after it": a
behaviour, with the margins of a busy 2-core machine, not a speed.

Usage: slow_clients_test.py ROSTER_BINARY
"""
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROSTER = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.join(ROOT, ".build/debug/roster")
WORK = tempfile.mkdtemp(prefix="roster-slow-")
HEAD_TIMEOUT = 10
VERSION_TIMEOUT = 30
# Past a timeout, how long the close may take on a loaded machine.
SLACK = 15

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import servers  # noqa: E402

SERVER = None
PORT = None
CONTEXT = None


def setUpModule():
    global SERVER, PORT, CONTEXT
    cert, key = os.path.join(WORK, "cert.pem"), os.path.join(WORK, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", key, "-out", cert],
                   check=True, capture_output=True)
    log = open(os.path.join(WORK, "server.log"), "w")
    SERVER = subprocess.Popen(
        [ROSTER, "serve", "--port", "0", "--db", os.path.join(WORK, "slow.sqlite"), "--seed-employees", "5",
         "--no-seed-pictures", "--tls-cert", cert, "--tls-key", key, "--max-idle-s", "3600"],
        stdout=subprocess.PIPE, stderr=log, text=True)
    line = SERVER.stdout.readline()
    if not line.startswith("listening on "):
        raise RuntimeError("server did not start: " + open(os.path.join(WORK, "server.log")).read())
    PORT = int(line.split()[-1].rsplit(":", 1)[1])
    CONTEXT = ssl.create_default_context(cafile=cert)
    CONTEXT.set_alpn_protocols(["http/1.1"])


def tearDownModule():
    if SERVER is not None:
        servers.stop(SERVER)
    shutil.rmtree(WORK, ignore_errors=True)


def tls_socket():
    raw = socket.create_connection(("127.0.0.1", PORT))
    return CONTEXT.wrap_socket(raw, server_hostname="localhost")


def closed_after(sock, send=b"", every=0.5, limit=VERSION_TIMEOUT + 3 * SLACK):
    """Sends `send` a byte at a time, `every` seconds apart (then nothing), until the server
    closes the connection; returns the seconds that took (None if it stayed open `limit`)."""
    start = time.monotonic()
    sock.settimeout(every)
    sent = 0
    while time.monotonic() - start < limit:
        try:
            if sent < len(send):
                sock.sendall(send[sent:sent + 1])
                sent += 1
            data = sock.recv(4096)
            if not data:
                return time.monotonic() - start
        except (socket.timeout, ssl.SSLWantReadError):
            continue
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError, OSError):
            return time.monotonic() - start
    return None


def response(sock):
    """One whole HTTP/1.1 response (head and its content-length of body); b"" if the
    connection closed first."""
    data = b""
    while b"\r\n\r\n" not in data:
        more = sock.recv(4096)
        if not more:
            return data
        data += more
    head, body = data.split(b"\r\n\r\n", 1)
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        more = sock.recv(4096)
        if not more:
            break
        body += more
    return head + b"\r\n\r\n" + body


def served():
    """A whole Connect GET over its own TLS connection: the status line's code."""
    with tls_socket() as sock:
        sock.settimeout(60)
        sock.sendall(b"POST /grpc.health.v1.Health/Check HTTP/1.1\r\nHost: localhost\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
        reply = b""
        while True:
            data = sock.recv(4096)
            if not data:
                break
            reply += data
    return reply.split(b" ", 2)[1]


class SlowClients(unittest.TestCase):
    def test_slowloris_head_is_dropped_at_the_head_timeout(self):
        head = b"POST /grpc.health.v1.Health/Check HTTP/1.1\r\nHost: localhost\r\n" + b"X-Slow: " + b"a" * 200
        with tls_socket() as sock:
            took = closed_after(sock, head)
        self.assertIsNotNone(took, "a head sent a byte every 0.5 s was never dropped")
        self.assertGreaterEqual(took, HEAD_TIMEOUT - 1)
        self.assertLess(took, HEAD_TIMEOUT + SLACK, f"dropped after {took:.1f} s")

    def test_trickled_second_request_is_dropped(self):
        with tls_socket() as sock:
            sock.settimeout(30)
            sock.sendall(b"POST /grpc.health.v1.Health/Check HTTP/1.1\r\nHost: localhost\r\n"
                         b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
            reply = response(sock)
            self.assertTrue(reply.startswith(b"HTTP/1.1 200"), reply[:100])
            took = closed_after(sock, b"POST /grpc.health.v1.Health/Check HTTP/1.1\r\n" + b"X-Slow: " + b"b" * 200)
        self.assertIsNotNone(took)
        self.assertLess(took, HEAD_TIMEOUT + SLACK, f"dropped after {took:.1f} s")

    def test_quiet_keepalive_connection_outlives_the_head_timeout(self):
        with tls_socket() as sock:
            sock.settimeout(30)
            request = (b"POST /grpc.health.v1.Health/Check HTTP/1.1\r\nHost: localhost\r\n"
                       b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
            sock.sendall(request)
            self.assertTrue(response(sock).startswith(b"HTTP/1.1 200"))
            time.sleep(HEAD_TIMEOUT + 3)
            sock.sendall(request)
            self.assertTrue(response(sock).startswith(b"HTTP/1.1 200"), "the quiet connection was closed")

    def test_stalled_tls_handshakes_are_dropped_and_others_served(self):
        # 100 connections that never finish their handshake: half send nothing, half a
        # ClientHello's first bytes one at a time.
        hello = bytes([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xFC, 0x03, 0x03]) + b"\x00" * 60
        times = [None] * 100
        sockets = [socket.create_connection(("127.0.0.1", PORT)) for _ in times]

        def hold(index):
            times[index] = closed_after(sockets[index], hello if index % 2 else b"", every=1.0)

        threads = [threading.Thread(target=hold, args=(i,)) for i in range(len(times))]
        for thread in threads:
            thread.start()
        time.sleep(2)
        self.assertEqual(served(), b"200", "a client was not served beside the stalled ones")
        for thread in threads:
            thread.join()
        for sock in sockets:
            sock.close()
        self.assertNotIn(None, times, "a stalled handshake was never dropped")
        self.assertGreaterEqual(min(times), VERSION_TIMEOUT - 1)
        self.assertLess(max(times), VERSION_TIMEOUT + SLACK, f"dropped after {max(times):.1f} s")


if __name__ == "__main__":
    unittest.main(verbosity=2)
