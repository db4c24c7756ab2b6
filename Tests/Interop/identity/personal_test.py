#!/usr/bin/env python3
"""Personal fields (those Protos/ marks `(roster.v1.personal) = true`) against the built binary,
for every read of employees on every protocol: gRPC (grpcio), the Connect protocol (JSON, unary
and streamed) and gRPC-Web (binary), over plain HTTP/1.1 (urllib).

The matrix is derived from the descriptors: the personal fields are read from the Employee
message's field options, and the reads are the Directory methods without side effects whose
answer holds employees; each request is filled in by its fields' names (guid, guids, email).
Callers: a reader signed in by the identity provider (idp.py) as one employee, who sees that
record's personal fields and no one else's; a static reader token, who sees none; an `hr` and an
`admin` caller, who see all. A read mask naming a personal field is PERMISSION_DENIED but on the
caller's own record; a write's answer follows the same rule.

Usage: personal_test.py ROSTER_BINARY
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import urllib.error
import urllib.request

import grpc
from google.protobuf import json_format

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
ROSTER = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.join(ROOT, ".build/debug/roster")
WORK = tempfile.mkdtemp(prefix="roster-personal-")

sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
import idp  # noqa: E402
import rosterstubs  # noqa: E402
import servers  # noqa: E402

rosterstubs.generate(WORK, ["types.proto", "directory.proto", "analytics.proto", "pictures.proto"])
from roster.v1 import analytics_pb2, analytics_pb2_grpc, directory_pb2, directory_pb2_grpc, options_pb2, types_pb2  # noqa: E402

PERSONAL = sorted(field.name for field in types_pb2.Employee.DESCRIPTOR.fields
                  if field.GetOptions().Extensions[options_pb2.personal])
SERVICE = directory_pb2.DESCRIPTOR.services_by_name["Directory"]


def employees_in(descriptor):
    """Whether a message type holds employees: is one, or has a (repeated) Employee field."""
    return descriptor.full_name == "roster.v1.Employee" or any(
        field.message_type is not None and field.message_type.full_name == "roster.v1.Employee"
        for field in descriptor.fields)


READS = [method for method in SERVICE.methods
         if method.GetOptions().idempotency_level == method.GetOptions().NO_SIDE_EFFECTS
         and employees_in(method.output_type)]

PROVIDER = None
SERVER = None
LOG = None
TARGET = None
STUB = None
TOKENS = {}
PEOPLE = []  # two employees: the signed-in reader ("me") and someone else ("other")
PICTURED = []  # others with a picture, whose bytes the self-service upload sends


def start():
    global PROVIDER, SERVER, LOG, TARGET, STUB
    PROVIDER = idp.Provider()
    key = PROVIDER.add_key("ES256")
    TOKENS.update(servers.write_tokens(ROSTER, WORK, ("reader", "writer", "admin")))
    LOG = open(os.path.join(WORK, "server.log"), "w")
    SERVER = subprocess.Popen(
        [ROSTER, "serve", "--port", "0", "--db", os.path.join(WORK, "personal.sqlite"), "--seed-employees", "30",
         "--seed-sales-per-employee", "0", "--tokens", os.path.join(WORK, "tokens"),
         "--oidc-issuer", PROVIDER.issuer, "--oidc-audience", "roster", "--oidc-role", "people-team=hr"],
        stdout=subprocess.PIPE, stderr=LOG, text=True)
    line = SERVER.stdout.readline()
    if not line.startswith("listening on "):
        raise RuntimeError("server did not start: " + open(os.path.join(WORK, "server.log")).read())
    TARGET = line.split()[-1]
    STUB = directory_pb2_grpc.DirectoryStub(grpc.insecure_channel(TARGET))
    page = STUB.ListEmployees(directory_pb2.ListEmployeesRequest(page_size=5),
                              metadata=[("authorization", f"Bearer {TOKENS['admin']}")], timeout=10)
    PEOPLE.extend(page.employees[:2])
    PICTURED.extend(e for e in page.employees[2:] if e.has_picture)
    for person in PEOPLE:
        assert all(person.HasField(name) for name in PERSONAL), "the demo employees have personal fields"
    me = PEOPLE[0]
    # The provider vouches for the reader's e-mail, in another case than the directory's.
    TOKENS["me"] = PROVIDER.token(key, sub="me", email=me.email.upper())
    TOKENS["unverified"] = PROVIDER.token(key, sub="liar", email=me.email, email_verified=False)
    TOKENS["hr"] = PROVIDER.token(key, sub="hr-1", roles=["people-team"])
    TOKENS["oidc-admin"] = PROVIDER.token(key, sub="admin-1", roles=["admin"])
    # Sign-in is ready once the provider's keys are fetched.
    import time
    deadline = time.monotonic() + 30
    while True:
        try:
            STUB.CountEmployees(directory_pb2.CountEmployeesRequest(),
                                metadata=[("authorization", f"Bearer {TOKENS['me']}")], timeout=10)
            break
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def finish():
    servers.stop(SERVER, LOG)
    PROVIDER.close()
    shutil.rmtree(WORK, ignore_errors=True)


def request_for(method, mask=()):
    """A request of `method` that reads both people, filled in by its fields' names."""
    request = getattr(directory_pb2, method.input_type.name)()
    names = {field.name for field in method.input_type.fields}
    if "guid" in names or "email" in names:
        return None  # one record per call: `single_requests`
    if "guids" in names:
        request.guids.extend(person.guid for person in PEOPLE)
    if "page_size" in names:
        request.page_size = 1000
    if mask:
        request.read_mask.paths.extend(mask)
    return request


def single_requests(method, person, mask=()):
    """A request of a method that reads one record, for `person`."""
    request = getattr(directory_pb2, method.input_type.name)()
    names = {field.name for field in method.input_type.fields}
    if "guid" in names:
        request.guid = person.guid
    elif "email" in names:
        request.email = person.email
    else:
        return None
    if mask:
        request.read_mask.paths.extend(mask)
    return request


def grpc_call(method, request, token):
    """The employees a gRPC call answers with, as dicts of the fields set."""
    call = getattr(STUB, method.name)
    metadata = [("authorization", f"Bearer {token}")]
    replies = list(call(request, metadata=metadata, timeout=10)) if method.server_streaming \
        else [call(request, metadata=metadata, timeout=10)]
    return [employee for reply in replies for employee in employees_of(reply)]


def employees_of(message):
    if message.DESCRIPTOR.full_name == "roster.v1.Employee":
        return [json_format.MessageToDict(message, preserving_proto_field_name=True)]
    out = []
    for field in message.DESCRIPTOR.fields:
        if field.message_type is not None and field.message_type.full_name == "roster.v1.Employee":
            out.extend(json_format.MessageToDict(e, preserving_proto_field_name=True)
                       for e in getattr(message, field.name))
    return out


def http_post(path, body, content_type, token):
    request = urllib.request.Request(f"http://{TARGET}{path}", data=body, method="POST", headers={
        "Content-Type": content_type, "Authorization": f"Bearer {token}", "X-Grpc-Web": "1"})
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, dict(reply.headers), reply.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def frames(body):
    out = []
    while body:
        flags, length = struct.unpack(">BI", body[:5])
        out.append((flags, body[5:5 + length]))
        body = body[5 + length:]
    return out


def connect_call(method, request, token):
    """The employees a Connect call answers with (JSON), or raises with its error code."""
    path = f"/roster.v1.Directory/{method.name}"
    body = json_format.MessageToJson(request, preserving_proto_field_name=True).encode()
    reply_type = getattr(directory_pb2, method.output_type.name, None) or types_pb2.Employee
    if not method.server_streaming:
        status, _, data = http_post(path, body, "application/json", token)
        if status != 200:
            raise CallError(json.loads(data)["code"])
        return employees_of(json_format.Parse(data, reply_type()))
    status, _, data = http_post(path, struct.pack(">BI", 0, len(body)) + body, "application/connect+json", token)
    out = []
    for flags, payload in frames(data):
        if flags & 2:
            end = json.loads(payload)
            if "error" in end:
                raise CallError(end["error"]["code"])
        else:
            out.extend(employees_of(json_format.Parse(payload, reply_type())))
    return out


def grpc_web_call(method, request, token):
    """The employees a gRPC-Web call (binary) answers with, or raises with its status."""
    path = f"/roster.v1.Directory/{method.name}"
    body = request.SerializeToString()
    reply_type = getattr(directory_pb2, method.output_type.name, None) or types_pb2.Employee
    status, headers, data = http_post(path, struct.pack(">BI", 0, len(body)) + body, "application/grpc-web+proto", token)
    out, code = [], headers.get("grpc-status")
    for flags, payload in frames(data):
        if flags & 0x80:
            trailers = dict(line.split(":", 1) for line in payload.decode().strip().split("\r\n") if line)
            code = trailers.get("grpc-status", "").strip()
        else:
            out.extend(employees_of(reply_type.FromString(payload)))
    if code not in (None, "0"):
        raise CallError(code)
    return out


class CallError(Exception):
    def __init__(self, code):
        super().__init__(code)
        self.code = str(code)


PROTOCOLS = {"grpc": grpc_call, "connect": connect_call, "grpc-web": grpc_web_call}
DENIED = {"grpc": "StatusCode.PERMISSION_DENIED", "connect": "permission_denied", "grpc-web": "7"}


def call(protocol, method, request, token):
    try:
        return PROTOCOLS[protocol](method, request, token)
    except grpc.RpcError as error:
        raise CallError(str(error.code())) from None


class PersonalFieldsTest(unittest.TestCase):
    def requests(self, mask=()):
        """(method, request) pairs that read both people: the pages and batches, and the
        one-record reads once per person."""
        for method in READS:
            request = request_for(method, mask)
            if request is not None:
                yield method, request
            else:
                for person in PEOPLE:
                    yield method, single_requests(method, person, mask)

    def test_the_matrix_is_complete(self):
        self.assertEqual(PERSONAL, ["address", "phone", "vacation_days"])
        self.assertEqual(sorted(m.name for m in READS),
                         ["BatchGetEmployees", "GetEmployee", "ListEmployees", "LookupEmployee", "StreamEmployees"])

    def test_who_sees_which_personal_fields(self):
        me, other = PEOPLE[0].guid, PEOPLE[1].guid
        sees = {"me": {me}, "unverified": set(), "reader": set(), "hr": {me, other},
                "oidc-admin": {me, other}, "admin": {me, other}}
        for protocol in PROTOCOLS:
            for method, request in self.requests():
                for caller, visible in sees.items():
                    with self.subTest(protocol=protocol, method=method.name, caller=caller):
                        employees = [e for e in call(protocol, method, request, TOKENS[caller])
                                     if e.get("guid") in (me, other)]
                        self.assertTrue(employees, "the read answered neither person")
                        for employee in employees:
                            shown = sorted(name for name in PERSONAL if name in employee)
                            expected = PERSONAL if employee["guid"] in visible else []
                            self.assertEqual(shown, expected, employee["guid"])
                            self.assertIn("name", employee)

    def test_a_mask_naming_a_personal_field(self):
        for protocol in PROTOCOLS:
            for method in READS:
                for name in PERSONAL:
                    with self.subTest(protocol=protocol, method=method.name, field=name):
                        mask = ("guid", name)
                        request = request_for(method, mask) or single_requests(method, PEOPLE[1], mask)
                        with self.assertRaises(CallError) as refused:
                            call(protocol, method, request, TOKENS["me"])
                        self.assertEqual(refused.exception.code, DENIED[protocol])
                        for employee in call(protocol, method, request, TOKENS["hr"]):
                            self.assertIn(name, employee)
                        own = single_requests(method, PEOPLE[0], mask)
                        if own is not None:
                            [employee] = call(protocol, method, own, TOKENS["me"])
                            self.assertIn(name, employee)

    def test_the_denial_names_the_field(self):
        request = directory_pb2.ListEmployeesRequest(read_mask={"paths": ["name", "phone"]})
        with self.assertRaises(grpc.RpcError) as refused:
            STUB.ListEmployees(request, metadata=[("authorization", f"Bearer {TOKENS['reader']}")], timeout=10)
        self.assertEqual(refused.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
        self.assertIn("'phone'", refused.exception.details())

    def test_a_writes_answer_follows_the_rule(self):
        # A writer without hr changes someone's record: the answer leaves out their personal
        # fields, which an admin's answer holds.
        other = PEOPLE[1]
        for token, shown in (("writer", []), ("admin", PERSONAL)):
            update = directory_pb2.UpdateEmployeeRequest(
                employee=types_pb2.Employee(guid=other.guid, about=f"updated by {token}"),
                update_mask={"paths": ["about"]})
            answer = STUB.UpdateEmployee(update, metadata=[("authorization", f"Bearer {TOKENS[token]}")], timeout=10)
            self.assertEqual(answer.about, f"updated by {token}")
            self.assertEqual(sorted(name for name in PERSONAL if answer.HasField(name)), shown, token)


class PersonalAggregatesTest(unittest.TestCase):
    """Aggregates over a personal field follow it: a filter can narrow one to a single person."""

    def test_vacation_aggregates(self):
        stub = analytics_pb2_grpc.AnalyticsStub(grpc.insecure_channel(TARGET))
        functions = [value.number for value in analytics_pb2.AggregateFunction.DESCRIPTOR.values if value.number]
        named = PEOPLE[1].name
        for caller, entitled in (("me", False), ("reader", False), ("hr", True), ("admin", True)):
            metadata = [("authorization", f"Bearer {TOKENS[caller]}")]
            for function in functions:
                with self.subTest(caller=caller, function=analytics_pb2.AggregateFunction.Name(function)):
                    request = analytics_pb2.AggregateEmployeesRequest(function=function, name_contains=named)
                    count = function == analytics_pb2.AGGREGATE_FUNCTION_COUNT
                    try:
                        stub.AggregateEmployees(request, metadata=metadata, timeout=10)
                        self.assertTrue(entitled or count)
                    except grpc.RpcError as error:
                        self.assertFalse(entitled or count, error.details())
                        self.assertEqual(error.code(), grpc.StatusCode.PERMISSION_DENIED)
                        self.assertIn("vacation_days", error.details())
            summary = stub.DepartmentSummary(analytics_pb2.DepartmentSummaryRequest(department=PEOPLE[1].department),
                                             metadata=metadata, timeout=10)
            self.assertGreater(summary.total, 0)
            self.assertEqual(summary.vacation_days_total > 0, entitled, caller)


class SelfServiceTest(unittest.TestCase):
    """A signed-in employee without the writer role changes their own phone, address, about and
    picture, and nothing else of anyone's."""

    def update(self, token, guid, **fields):
        request = directory_pb2.UpdateEmployeeRequest(employee=types_pb2.Employee(guid=guid, **fields),
                                                      update_mask={"paths": list(fields)})
        try:
            return grpc.StatusCode.OK, STUB.UpdateEmployee(
                request, metadata=[("authorization", f"Bearer {TOKENS[token]}")], timeout=10), ""
        except grpc.RpcError as error:
            return error.code(), None, error.details()

    def test_own_record_only(self):
        me, other = PEOPLE[0], PEOPLE[1]
        status, answer, details = self.update("me", me.guid, phone="+1 555 0100", address="1 Own Street", about="mine")
        self.assertEqual(status, grpc.StatusCode.OK, details)
        self.assertEqual((answer.phone, answer.address, answer.about), ("+1 555 0100", "1 Own Street", "mine"))
        for fields in ({"name": "Someone Else"}, {"vacation_days": 99}, {"department": "Boardroom"}):
            with self.subTest(fields=fields):
                status, _, details = self.update("me", me.guid, **fields)
                self.assertEqual(status, grpc.StatusCode.PERMISSION_DENIED, details)
                self.assertIn(f"'{next(iter(fields))}'", details)
        status, _, details = self.update("me", other.guid, phone="+1 555 0199")
        self.assertEqual(status, grpc.StatusCode.PERMISSION_DENIED, details)
        self.assertIn("employee.guid", details)
        # No e-mail the provider vouches for, no own record: a reader's write is refused.
        for token in ("unverified", "reader"):
            self.assertEqual(self.update(token, me.guid, phone="+1 555 0111")[0], grpc.StatusCode.PERMISSION_DENIED)
        # Nothing else changed: the other's record is as before.
        after = STUB.GetEmployee(directory_pb2.GetEmployeeRequest(guid=other.guid),
                                 metadata=[("authorization", f"Bearer {TOKENS['admin']}")], timeout=10)
        self.assertEqual(after.phone, other.phone)

    def test_own_picture_only(self):
        from roster.v1 import pictures_pb2, pictures_pb2_grpc
        stub = pictures_pb2_grpc.PicturesStub(grpc.insecure_channel(TARGET))
        admin = [("authorization", f"Bearer {TOKENS['admin']}")]
        source = next(e for e in PICTURED if e.picture_etag != PEOPLE[0].picture_etag)
        picture = b"".join(part.data for part in stub.GetPicture(
            pictures_pb2.GetPictureRequest(guid=source.guid), metadata=admin, timeout=20))

        def put(token, guid):
            def messages():
                yield pictures_pb2.PutPictureRequest(header=pictures_pb2.PictureHeader(
                    guid=guid, content_type="image/jpeg", total_size=len(picture)))
                yield pictures_pb2.PutPictureRequest(chunk=picture)
            try:
                stub.PutPicture(messages(), metadata=[("authorization", f"Bearer {TOKENS[token]}")], timeout=20)
                return grpc.StatusCode.OK
            except grpc.RpcError as error:
                return error.code()

        self.assertEqual(put("me", PEOPLE[0].guid), grpc.StatusCode.OK)
        self.assertEqual(put("me", PEOPLE[1].guid), grpc.StatusCode.PERMISSION_DENIED)
        self.assertEqual(put("reader", PEOPLE[0].guid), grpc.StatusCode.PERMISSION_DENIED)
        mine = STUB.GetEmployee(directory_pb2.GetEmployeeRequest(guid=PEOPLE[0].guid), metadata=admin, timeout=10)
        theirs = STUB.GetEmployee(directory_pb2.GetEmployeeRequest(guid=PEOPLE[1].guid), metadata=admin, timeout=10)
        self.assertEqual(mine.picture_etag, source.picture_etag)
        self.assertEqual(theirs.picture_etag, PEOPLE[1].picture_etag)


if __name__ == "__main__":
    start()
    try:
        loader = unittest.TestLoader()
        suite = unittest.TestSuite([loader.loadTestsFromTestCase(PersonalFieldsTest),
                                    loader.loadTestsFromTestCase(PersonalAggregatesTest),
                                    loader.loadTestsFromTestCase(SelfServiceTest)])
        result = unittest.TextTestRunner(verbosity=1).run(suite)
    finally:
        finish()
    sys.exit(0 if result.wasSuccessful() else 1)
