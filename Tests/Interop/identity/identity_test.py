#!/usr/bin/env python3
"""Sign-in with an OpenID Connect provider, against the built binary: a test provider written
here (idp.py) serves discovery and keys on loopback; grpcio and curl (the Connect protocol) call
with its tokens. Good tokens of each algorithm and role pass; each kind of bad token is refused
with UNAUTHENTICATED and a reason; the provider's keys rotate during the run without a restart;
a flood of made-up key ids does not make the server hammer the provider; a provider that goes
down leaves its keys working; no token reaches the server's log.

Usage: identity_test.py ROSTER_BINARY
"""
import hashlib
import hmac
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import uuid

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
ROSTER = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.join(ROOT, ".build/debug/roster")
WORK = tempfile.mkdtemp(prefix="roster-identity-")
REFETCH_SECONDS = 5  # TokenVerifier.Settings.refetchInterval

sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
import idp  # noqa: E402
import rosterstubs  # noqa: E402
import servers  # noqa: E402

rosterstubs.generate(WORK, ["types.proto", "directory.proto"])
from roster.v1 import directory_pb2, directory_pb2_grpc  # noqa: E402

PROVIDER = None
SERVER = None
LOG = None
TARGET = None
CHANNEL = None
STUB = None
STATIC = {}
KEYS = {}
SEEN_TOKENS = []


def start():
    global PROVIDER, SERVER, LOG, TARGET, CHANNEL, STUB
    PROVIDER = idp.Provider()
    for alg in ("RS256", "ES256", "EdDSA"):
        KEYS[alg] = PROVIDER.add_key(alg)
    STATIC.update(servers.write_tokens(ROSTER, WORK, ("reader",)))
    LOG = open(os.path.join(WORK, "server.log"), "w")
    SERVER = subprocess.Popen(
        [ROSTER, "serve", "--port", "0", "--db", os.path.join(WORK, "identity.sqlite"), "--seed-employees", "20",
         "--no-seed-pictures", "--seed-sales-per-employee", "0", "--tokens", os.path.join(WORK, "tokens"),
         "--oidc-issuer", PROVIDER.issuer, "--oidc-audience", "roster",
         "--oidc-role", "roster-writers=writer", "--oidc-role", "roster-admins=admin",
         "--oidc-refresh-seconds", "3600"],
        stdout=subprocess.PIPE, stderr=LOG, text=True)
    line = SERVER.stdout.readline()
    if not line.startswith("listening on "):
        raise RuntimeError("server did not start: " + open(os.path.join(WORK, "server.log")).read())
    TARGET = line.split()[-1]
    CHANNEL = grpc.insecure_channel(TARGET, options=[("grpc.max_metadata_size", 1 << 20)])
    STUB = directory_pb2_grpc.DirectoryStub(CHANNEL)
    # The keys load in the background: until then a provider's token is UNAVAILABLE.
    token = token_for(KEYS["RS256"])
    deadline = time.monotonic() + 30
    while True:
        code, _ = count(token)
        if code == grpc.StatusCode.OK:
            break
        if code != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
            raise RuntimeError(f"sign-in never became ready: {code}")
        time.sleep(0.1)


def finish():
    CHANNEL.close()
    servers.stop(SERVER, LOG)
    PROVIDER.close()
    log = open(os.path.join(WORK, "server.log")).read()
    shutil.rmtree(WORK, ignore_errors=True)
    # No token, good or refused, appears in the log: its signature part is unique to it.
    for token in SEEN_TOKENS:
        tail = token.rsplit(".", 1)[-1][-40:]
        if len(tail) >= 20 and tail in log:
            line = next(line for line in log.splitlines() if tail in line)
            raise AssertionError(f"a bearer token reached the server's log: {line[:300]}")


def token_for(key, **claims):
    token = PROVIDER.token(key, sub=claims.pop("sub", "ada"), **claims)
    SEEN_TOKENS.append(token)
    return token


def call(method, request, token):
    """(status code, details) of one call with `token` as its bearer token."""
    try:
        method(request, metadata=[("authorization", f"Bearer {token}")], timeout=10)
        return grpc.StatusCode.OK, ""
    except grpc.RpcError as error:
        return error.code(), error.details()


def count(token):
    return call(STUB.CountEmployees, directory_pb2.CountEmployeesRequest(), token)


class SignInTest(unittest.TestCase):
    def assert_refused(self, token, mentioning, code=grpc.StatusCode.UNAUTHENTICATED):
        status, details = count(token)
        self.assertEqual(status, code, details)
        self.assertIn(mentioning, details)

    def test_each_algorithm_signs_in_and_roles_map(self):
        for alg, key in KEYS.items():
            with self.subTest(alg=alg):
                self.assertEqual(count(token_for(key))[0], grpc.StatusCode.OK)
        # No roles claim: the default role, reader. A writer's call is refused for its role.
        reader = token_for(KEYS["RS256"], sub="reader-1")
        writer = token_for(KEYS["ES256"], sub="writer-1", roles=["staff", "roster-writers"])
        admin = token_for(KEYS["EdDSA"], sub="admin-1", roles="roster-admins")
        create = directory_pb2.CreateEmployeeRequest()  # empty: refused after its role is checked
        status, details = call(STUB.CreateEmployee, create, reader)
        self.assertEqual(status, grpc.StatusCode.PERMISSION_DENIED, details)
        self.assertIn("writer role", details)
        self.assertEqual(call(STUB.CreateEmployee, create, writer)[0], grpc.StatusCode.INVALID_ARGUMENT)
        delete = directory_pb2.DeleteEmployeesRequest()
        self.assertEqual(call(STUB.DeleteEmployees, delete, writer)[0], grpc.StatusCode.PERMISSION_DENIED)
        self.assertEqual(call(STUB.DeleteEmployees, delete, admin)[0], grpc.StatusCode.INVALID_ARGUMENT)
        # A role's own name in the claim gives that role.
        named = token_for(KEYS["RS256"], sub="writer-2", roles=["writer"])
        self.assertEqual(call(STUB.CreateEmployee, create, named)[0], grpc.StatusCode.INVALID_ARGUMENT)

    def test_static_tokens_still_work(self):
        self.assertEqual(count(STATIC["reader"])[0], grpc.StatusCode.OK)
        self.assert_refused("rst_not-a-token", "not known")

    def test_bad_tokens_are_refused_with_a_reason(self):
        key = KEYS["RS256"]
        now = int(time.time())
        good = token_for(key)
        head, body, signature = good.split(".")
        tampered_body = idp.b64json({**json.loads(idp.base64.urlsafe_b64decode(body + "==")), "sub": "mallory"})
        hs_input = f"{idp.b64json({'alg': 'HS256', 'kid': key.kid, 'typ': 'JWT'})}.{body}"
        hs256 = hs_input + "." + idp.b64url(hmac.new(key.public_pem(), hs_input.encode(), hashlib.sha256).digest())
        none = f"{idp.b64json({'alg': 'none', 'typ': 'JWT'})}.{body}."
        cases = {
            "expired": (token_for(key, exp=now - 3600, iat=now - 7200, nbf=now - 7200), "expired"),
            "not yet valid": (token_for(key, nbf=now + 3600), "not valid yet"),
            "issued in the future": (token_for(key, iat=now + 3600), "issued in the future"),
            "wrong issuer": (token_for(key, iss="https://evil.example"), "not issued by"),
            "wrong audience": (token_for(key, aud=["other-app"]), "audience"),
            "no expiry": (token_for(key, exp=None), "no expiry"),
            "alg none": (none, "alg 'none'"),
            "HS256 with the public key as secret": (hs256, "alg 'HS256'"),
            "unknown kid": (token_for(key, header={"kid": "no-such-key"}), "does not publish"),
            "tampered payload": (f"{head}.{tampered_body}.{signature}", "signature"),
            "alg swapped to another key's": (token_for(key, header={"alg": "ES256"}), "not its key's"),
            "64 KB": (token_for(key, padding="x" * 65536), "longer than"),
            "not a JWT": ("a.b.c", "not a signed JSON Web Token"),
        }
        SEEN_TOKENS.extend(token for token, _ in cases.values())
        for name, (token, reason) in cases.items():
            with self.subTest(name):
                self.assert_refused(token, reason)

    def test_the_change_log_records_the_principal(self):
        from roster.v1 import types_pb2
        reader = [("authorization", f"Bearer {STATIC['reader']}")]
        watch = STUB.WatchChanges(directory_pb2.WatchChangesRequest(heartbeat_interval={"seconds": 1}),
                                  metadata=reader, timeout=30)
        start = next(iter(watch)).token  # the first heartbeat: the feed's position now
        watch.cancel()
        writer = token_for(KEYS["ES256"], sub="writer-audit", roles=["roster-writers"])
        admin = token_for(KEYS["EdDSA"], sub="admin-audit", roles=["roster-admins"])
        employee = types_pb2.Employee(name="Audit Ann", department="Audit", start_date="2020-02-02")
        created = STUB.CreateEmployee(directory_pb2.CreateEmployeeRequest(employee=employee),
                                      metadata=[("authorization", f"Bearer {writer}")], timeout=10)
        # A person signed in below admin cannot record a change in another's name.
        try:
            STUB.CreateEmployee(directory_pb2.CreateEmployeeRequest(employee=employee), timeout=10,
                                metadata=[("authorization", f"Bearer {writer}"), ("x-roster-author", "Grace Hopper")])
            self.fail("a signed-in writer acted on behalf of someone")
        except grpc.RpcError as error:
            self.assertEqual(error.code(), grpc.StatusCode.PERMISSION_DENIED)
            self.assertIn("x-roster-author", error.details())
        # An admin may; the name is recorded beside the admin's principal.
        update = directory_pb2.UpdateEmployeeRequest(employee=types_pb2.Employee(guid=created.guid, about="audited"),
                                                     update_mask={"paths": ["about"]})
        STUB.UpdateEmployee(update, timeout=10,
                            metadata=[("authorization", f"Bearer {admin}"), ("x-roster-author", "Grace Hopper")])
        events = []
        for event in STUB.WatchChanges(directory_pb2.WatchChangesRequest(after_token=start), metadata=reader, timeout=30):
            if event.guid == created.guid:
                events.append(event)
            if len(events) == 2:
                break
        self.assertEqual([(e.kind, e.author, e.on_behalf_of) for e in events], [
            (types_pb2.CHANGE_KIND_INSERTED, f"{PROVIDER.issuer}#writer-audit", ""),
            (types_pb2.CHANGE_KIND_UPDATED, f"{PROVIDER.issuer}#admin-audit", "Grace Hopper"),
        ])
        # Only one employee was made: the refused call changed nothing.
        count = STUB.CountEmployees(directory_pb2.CountEmployeesRequest(name_contains="Audit Ann"),
                                    metadata=reader, timeout=10)
        self.assertEqual(count.count, 1)
        log = open(os.path.join(WORK, "server.log")).read()
        self.assertIn(f"rpc.principal={PROVIDER.issuer}#admin-audit", log)
        self.assertIn("rpc.on_behalf_of=Grace Hopper", log)

    def test_the_connect_protocol_checks_the_same_tokens(self):
        base = f"http://{TARGET}/roster.v1.Directory/CountEmployees"

        def post(token):
            reply = subprocess.run(
                ["curl", "-s", "-o", "-", "-w", "\n%{http_code}", "-X", "POST", base,
                 "-H", "Content-Type: application/json", "-H", f"Authorization: Bearer {token}", "-d", "{}"],
                capture_output=True, text=True, timeout=30, check=True).stdout
            body, status = reply.rsplit("\n", 1)
            return int(status), body

        status, body = post(token_for(KEYS["ES256"]))
        self.assertEqual(status, 200, body)
        status, body = post(token_for(KEYS["ES256"], exp=int(time.time()) - 600))
        self.assertEqual(status, 401, body)
        self.assertEqual(json.loads(body)["code"], "unauthenticated")
        self.assertIn("expired", json.loads(body)["message"])


class KeysTest(unittest.TestCase):
    """In order: a flood of made-up key ids, a rotation, then the provider down."""

    def test_keys_follow_the_provider(self):
        # A flood of made-up key ids: refused, and the key set fetched at most once per
        # refetch interval (and once more for the boundary).
        before, started = PROVIDER.jwks_requests, time.monotonic()
        for _ in range(300):
            token = PROVIDER.token(KEYS["ES256"], sub="flood", header={"kid": uuid.uuid4().hex})
            self.assertEqual(count(token)[0], grpc.StatusCode.UNAUTHENTICATED)
        elapsed = time.monotonic() - started
        fetched = PROVIDER.jwks_requests - before
        self.assertLessEqual(fetched, int(elapsed / REFETCH_SECONDS) + 2, f"{fetched} fetches in {elapsed:.1f} s")

        # Rotation: a new key's tokens pass once the server has fetched it (asked for by the
        # first token that names it), without a restart.
        old_key = KEYS["RS256"]
        old_token = token_for(old_key, sub="before-rotation")
        self.assertEqual(count(old_token)[0], grpc.StatusCode.OK)
        new_key = PROVIDER.add_key("RS256")
        new_token = token_for(new_key, sub="after-rotation")
        self.eventually(lambda: count(new_token)[0] == grpc.StatusCode.OK, "the new key's token never passed")
        # The provider drops the old key: its tokens, checked and remembered before, stop.
        PROVIDER.drop_key(old_key)
        probe = PROVIDER.token(KEYS["ES256"], sub="probe", header={"kid": "ask-for-a-refetch"})

        def old_refused():
            count(probe)  # an unknown key id asks for a fetch (at most one per interval)
            status, details = count(old_token)
            return status == grpc.StatusCode.UNAUTHENTICATED and "does not publish" in details

        self.eventually(old_refused, "the dropped key's token still passed")

        # The provider goes down: the keys it gave keep working, and the failure is logged.
        PROVIDER.close()
        time.sleep(REFETCH_SECONDS + 0.5)
        count(probe)  # asks for a fetch, which fails
        self.eventually(lambda: "could not fetch the identity provider's keys" in open(os.path.join(WORK, "server.log")).read(),
                        "the failed fetch was not logged")
        self.assertEqual(count(token_for(new_key, sub="provider-down"))[0], grpc.StatusCode.OK)
        self.assertEqual(count(token_for(KEYS["EdDSA"], sub="provider-down"))[0], grpc.StatusCode.OK)

    def eventually(self, check, message, seconds=30):
        deadline = time.monotonic() + seconds
        while not check():
            if time.monotonic() > deadline:
                self.fail(message)
            time.sleep(0.25)


if __name__ == "__main__":
    # The key tests close the provider: they run last.
    suite = unittest.TestSuite()
    loader = unittest.TestLoader()
    suite.addTests(loader.loadTestsFromTestCase(SignInTest))
    suite.addTests(loader.loadTestsFromTestCase(KeysTest))
    start()
    try:
        result = unittest.TextTestRunner(verbosity=2).run(suite)
    finally:
        finish()
    sys.exit(0 if result.wasSuccessful() else 1)
