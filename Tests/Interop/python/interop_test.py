#!/usr/bin/env python3
"""Roster's interop suite, driven by an independent client: Python's grpcio.

It generates stubs from Protos/ with grpcio-tools, starts the built `roster` binary on
loopback with a tokens file, and calls every RPC of the three services (the streaming ones
with cancellation too), checks health with grpcio-health-checking, discovers the services
through reflection with grpcio-reflection, and checks authentication and the documented
error statuses.

Usage: interop_test.py ROSTER_BINARY   (scripts/test runs it after the Swift suites)
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request
import uuid

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from google.protobuf import descriptor_pool, field_mask_pb2
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROSTER = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.join(ROOT, ".build/debug/roster")
WORK = tempfile.mkdtemp(prefix="roster-interop-")

# Stubs from our protos, made by grpcio-tools, never by the Swift build.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import rosterstubs  # noqa: E402
import servers  # noqa: E402

STUBS = rosterstubs.generate(WORK)
from roster.v1 import analytics_pb2, analytics_pb2_grpc  # noqa: E402
from roster.v1 import directory_pb2, directory_pb2_grpc  # noqa: E402
from roster.v1 import pictures_pb2, pictures_pb2_grpc  # noqa: E402
from roster.v1 import types_pb2  # noqa: E402

SERVER = None
SERVER_LOG = None
ADDRESS = None
METRICS_URL = None
TOKENS = {}
# With ROSTER_INTEROP_POSTGRES=URL the same suite runs against `roster serve --postgres`, in a
# schema of its own.
BACKEND = (["--postgres", os.environ["ROSTER_INTEROP_POSTGRES"],
            "--postgres-schema", "interop_" + str(os.getpid())]
           if os.environ.get("ROSTER_INTEROP_POSTGRES") else [])
# ROSTER_SERVE_ARGS: more `roster serve` flags.
SERVE_ARGS = os.environ.get("ROSTER_SERVE_ARGS", "").split()
# ROSTER_INTEROP_COMPRESSION=gzip (or deflate): every call's messages are compressed, as a
# grpcio channel option does it (scripts/test runs the suite once so).
COMPRESSION = {"gzip": grpc.Compression.Gzip, "deflate": grpc.Compression.Deflate}.get(
    os.environ.get("ROSTER_INTEROP_COMPRESSION", ""), grpc.Compression.NoCompression)


def setUpModule():
    global SERVER, SERVER_LOG, ADDRESS, METRICS_URL
    TOKENS.update(servers.write_tokens(ROSTER, WORK, ("reader", "writer", "admin")))
    SERVER_LOG = open(os.path.join(WORK, "server.log"), "w")
    SERVER = subprocess.Popen(
        [ROSTER, "serve", "--port", "0", "--db", os.path.join(WORK, "interop.sqlite"),
         "--seed-employees", "60", "--seed-sales-per-employee", "5",
         "--tokens", os.path.join(WORK, "tokens"), "--metrics-port", "0"] + BACKEND + SERVE_ARGS,
        stdout=subprocess.PIPE, stderr=SERVER_LOG, text=True)
    for _ in range(2):
        line = SERVER.stdout.readline()
        if line.startswith("listening on "):
            ADDRESS = line.split()[-1]
        elif line.startswith("metrics on "):
            METRICS_URL = line.split()[-1]
        else:
            raise RuntimeError("server did not start: " + read_log())


def read_log():
    with open(os.path.join(WORK, "server.log")) as f:
        return f.read()


def tearDownModule():
    SERVER.send_signal(signal.SIGTERM)
    code = SERVER.wait(timeout=30)
    SERVER.stdout.close()
    SERVER_LOG.close()
    log = read_log()
    if any(token in log for token in TOKENS.values()):
        raise AssertionError("a token reached the server log")
    if code != 0:
        raise AssertionError(f"server exited {code} on SIGTERM:\n{log[-2000:]}")
    # The writer's static token is a service's: it may say whom it acts for.
    if "rpc.method=roster.v1.Directory/CreateEmployee" not in log or "rpc.on_behalf_of=interop" not in log:
        raise AssertionError("the server logged no line for an RPC: " + log[-2000:])
    shutil.rmtree(WORK)


def auth(role):
    return (("authorization", "Bearer " + TOKENS[role]),) if role else ()


class Interop(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.channel = grpc.insecure_channel(ADDRESS, compression=COMPRESSION)
        cls.directory = directory_pb2_grpc.DirectoryStub(cls.channel)
        cls.pictures = pictures_pb2_grpc.PicturesStub(cls.channel)
        cls.analytics = analytics_pb2_grpc.AnalyticsStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()

    def assertStatus(self, code, mentioning, call, *args, **kwargs):
        with self.assertRaises(grpc.RpcError) as caught:
            result = call(*args, **kwargs)
            if hasattr(result, "__iter__") and not hasattr(result, "ByteSize"):
                list(result)
        self.assertEqual(caught.exception.code(), code, caught.exception.details())
        self.assertIn(mentioning, caught.exception.details())
        self.assertNotIn("SELECT", caught.exception.details())

    def guids(self, count=10):
        page = self.directory.ListEmployees(directory_pb2.ListEmployeesRequest(page_size=count), metadata=auth("reader"))
        return [e.guid for e in page.employees]

    # Discovery and probes: open, no token.

    def test_health(self):
        stub = health_pb2_grpc.HealthStub(self.channel)
        for service in ("", "roster.v1.Directory", "roster.v1.Pictures", "roster.v1.Analytics"):
            self.assertEqual(stub.Check(health_pb2.HealthCheckRequest(service=service)).status,
                             health_pb2.HealthCheckResponse.SERVING)
        self.assertStatus(grpc.StatusCode.NOT_FOUND, "nope", stub.Check, health_pb2.HealthCheckRequest(service="nope"))

    def test_reflection(self):
        database = ProtoReflectionDescriptorDatabase(self.channel)
        services = set(database.get_services())
        self.assertTrue({"roster.v1.Directory", "roster.v1.Pictures", "roster.v1.Analytics",
                         "grpc.health.v1.Health"} <= services, services)
        pool = descriptor_pool.DescriptorPool(database)
        # The server's reflection serves every method the protos declare (grpcio-tools' stubs,
        # made from Protos/ for this run).
        for module in (directory_pb2, pictures_pb2, analytics_pb2):
            for name, service in module.DESCRIPTOR.services_by_name.items():
                served = [method.name for method in pool.FindServiceByName(service.full_name).methods]
                self.assertEqual(served, [method.name for method in service.methods], name)
        employee = pool.FindMessageTypeByName("roster.v1.Employee")
        self.assertIn("start_date", employee.fields_by_name)
        method = pool.FindMethodByName("roster.v1.Directory.StreamEmployees")
        self.assertTrue(method.server_streaming)

    # Authentication and roles.

    def test_auth(self):
        request = directory_pb2.CountEmployeesRequest()
        self.assertStatus(grpc.StatusCode.UNAUTHENTICATED, "bearer token", self.directory.CountEmployees, request)
        self.assertStatus(grpc.StatusCode.UNAUTHENTICATED, "not known", self.directory.CountEmployees, request,
                          metadata=(("authorization", "Bearer rst_wrong"),))
        before = self.directory.CountEmployees(request, metadata=auth("reader")).count
        create = directory_pb2.CreateEmployeeRequest(employee=types_pb2.Employee(name="Reader Attempt", department="Design"))
        self.assertStatus(grpc.StatusCode.PERMISSION_DENIED, "writer", self.directory.CreateEmployee, create, metadata=auth("reader"))
        self.assertStatus(grpc.StatusCode.PERMISSION_DENIED, "admin", self.directory.DeleteEmployees,
                          directory_pb2.DeleteEmployeesRequest(all=True, limit=1000), metadata=auth("writer"))
        self.assertStatus(grpc.StatusCode.PERMISSION_DENIED, "admin", self.analytics.DeleteSales,
                          analytics_pb2.DeleteSalesRequest(before_date="2100-01-01", limit=1000), metadata=auth("writer"))
        self.assertEqual(self.directory.CountEmployees(request, metadata=auth("reader")).count, before)

    # Directory.

    def test_directory_reads(self):
        total = self.directory.CountEmployees(directory_pb2.CountEmployeesRequest(), metadata=auth("reader")).count
        self.assertGreaterEqual(total, 50)
        seen, token = [], ""
        while True:
            page = self.directory.ListEmployees(directory_pb2.ListEmployeesRequest(page_size=25, page_token=token),
                                                metadata=auth("reader"))
            seen += [e.guid for e in page.employees]
            token = page.next_page_token
            if not token:
                break
        streamed = [e.guid for page in self.directory.StreamEmployees(directory_pb2.ListEmployeesRequest(page_size=7),
                                                                       metadata=auth("reader")) for e in page.employees]
        self.assertEqual(len(set(seen)), len(seen))
        self.assertEqual(sorted(seen), sorted(streamed))
        one = self.directory.GetEmployee(directory_pb2.GetEmployeeRequest(
            guid=seen[0], read_mask=field_mask_pb2.FieldMask(paths=["guid", "name"])), metadata=auth("reader"))
        self.assertEqual(one.guid, seen[0])
        self.assertTrue(one.name)
        self.assertFalse(one.HasField("department"))
        batch = self.directory.BatchGetEmployees(directory_pb2.BatchGetEmployeesRequest(guids=seen[:5][::-1]),
                                                 metadata=auth("reader"))
        self.assertEqual([e.guid for e in batch.employees], seen[:5][::-1])
        # LookupEmployee: ASCII letters in another case find the address (the first created of
        # those who share it); the checks name the field.
        email = self.directory.GetEmployee(directory_pb2.GetEmployeeRequest(guid=seen[0]),
                                           metadata=auth("reader")).email
        shouted = "".join(c.upper() if c.isascii() else c for c in email)
        found = self.directory.LookupEmployee(directory_pb2.LookupEmployeeRequest(email=shouted),
                                              metadata=auth("reader"))
        self.assertEqual(found.email.lower(), email.lower())
        for request, code, text in [
                (directory_pb2.LookupEmployeeRequest(), grpc.StatusCode.INVALID_ARGUMENT, "email"),
                (directory_pb2.LookupEmployeeRequest(email="nobody@invalid.example"), grpc.StatusCode.NOT_FOUND,
                 "email")]:
            with self.assertRaises(grpc.RpcError) as caught:
                self.directory.LookupEmployee(request, metadata=auth("reader"))
            self.assertEqual(caught.exception.code(), code)
            self.assertIn(text, caught.exception.details())

    def test_stream_cancellation(self):
        call = self.directory.StreamEmployees(directory_pb2.ListEmployeesRequest(page_size=2), metadata=auth("reader"))
        first = next(call)
        self.assertEqual(len(first.employees), 2)
        call.cancel()
        with self.assertRaises(grpc.RpcError) as caught:
            list(call)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.CANCELLED)
        # The server goes on serving.
        self.assertGreater(self.directory.CountEmployees(directory_pb2.CountEmployeesRequest(), metadata=auth("reader")).count, 0)

    def test_writes_and_change_feed(self):
        # The demo data is one bulk load, which the log records as one gap: a replay from
        # before it is OUT_OF_RANGE (list again), as after pruning.
        self.assertStatus(grpc.StatusCode.OUT_OF_RANGE, "pruned", self.directory.WatchChanges,
                          directory_pb2.WatchChangesRequest(after_token="0"), metadata=auth("reader"))

        created, call = self.directory.CreateEmployee.with_call(directory_pb2.CreateEmployeeRequest(
            employee=types_pb2.Employee(name="Interop Ada", department="Research", start_date="2024-02-29",
                                        vacation_days=3)),
            metadata=auth("writer") + (("x-roster-author", "interop"),))
        self.assertTrue(created.guid)
        before_create = str(int(dict(call.initial_metadata())["x-roster-change-token"]) - 1)
        updated, call = self.directory.UpdateEmployee.with_call(directory_pb2.UpdateEmployeeRequest(
            employee=types_pb2.Employee(guid=created.guid, vacation_days=9),
            update_mask=field_mask_pb2.FieldMask(paths=["vacation_days"])), metadata=auth("writer"))
        # The reply carries the write's change token: its position in the feed.
        token = dict(call.initial_metadata()).get("x-roster-change-token")
        self.assertIsNotNone(token)
        replay = self.directory.WatchChanges(directory_pb2.WatchChangesRequest(after_token=str(int(token) - 1)),
                                             metadata=auth("reader"))
        event = next(replay)
        replay.cancel()
        self.assertEqual((event.token, event.guid, event.kind), (token, created.guid, types_pb2.CHANGE_KIND_UPDATED))
        # Vacation days are personal: the writer's answer leaves them out; an admin reads them.
        self.assertFalse(updated.HasField("vacation_days"))
        self.assertEqual(updated.name, "Interop Ada")
        self.assertEqual(self.directory.GetEmployee(directory_pb2.GetEmployeeRequest(guid=created.guid),
                                                    metadata=auth("admin")).vacation_days, 9)

        def upserts():
            yield directory_pb2.UpsertEmployeesRequest(employees=[
                types_pb2.Employee(guid=created.guid, about="upserted"),
                types_pb2.Employee(guid=str(uuid.uuid4()), name="Interop Bo", department="Research",
                                   start_date="2023-05-01")])
            yield directory_pb2.UpsertEmployeesRequest(employees=[types_pb2.Employee(guid=str(uuid.uuid4()), name="",
                                                                                   department="Research")])
        summary = self.directory.UpsertEmployees(upserts(), metadata=auth("writer"))
        self.assertEqual((summary.inserted, summary.updated, len(summary.rejected)), (1, 1, 1))
        self.assertEqual(summary.rejected[0].index, 2)

        changed = self.directory.BatchUpdateEmployees(directory_pb2.BatchUpdateEmployeesRequest(
            name_contains="interop", set_vacation_days=11), metadata=auth("admin"))
        self.assertEqual(changed.affected, 2)

        # The feed replays what happened after the token, with the author.
        feed = self.directory.WatchChanges(directory_pb2.WatchChangesRequest(after_token=before_create),
                                           metadata=auth("reader"))
        events = []
        for event in feed:
            events.append(event)
            if event.guid == created.guid and event.kind == types_pb2.CHANGE_KIND_INSERTED:
                break
        feed.cancel()
        # The author is the writer's token (no label: its hash's first bytes); the name it sent
        # is whom it acted for.
        self.assertRegex(events[-1].author, r"^token:[0-9a-f]{16}$")
        self.assertEqual(events[-1].on_behalf_of, "interop")

        self.directory.DeleteEmployee(directory_pb2.DeleteEmployeeRequest(guid=created.guid), metadata=auth("writer"))
        self.assertStatus(grpc.StatusCode.NOT_FOUND, created.guid, self.directory.GetEmployee,
                          directory_pb2.GetEmployeeRequest(guid=created.guid), metadata=auth("reader"))
        deleted = self.directory.DeleteEmployees(directory_pb2.DeleteEmployeesRequest(name_contains="interop", limit=10),
                                                 metadata=auth("admin"))
        self.assertEqual((deleted.deleted, deleted.more), (1, False))

    # Pictures.

    def test_pictures(self):
        owner = next(e for e in self.directory.ListEmployees(directory_pb2.ListEmployeesRequest(page_size=50),
                                                            metadata=auth("reader")).employees if e.has_picture)
        parts = list(self.pictures.GetPicture(pictures_pb2.GetPictureRequest(guid=owner.guid), metadata=auth("reader")))
        picture = b"".join(p.data for p in parts)
        self.assertEqual(len(picture), parts[0].total_size)
        self.assertEqual(parts[0].content_type, "image/jpeg")

        target = self.directory.CreateEmployee(directory_pb2.CreateEmployeeRequest(employee=types_pb2.Employee(
            name="Pictured Pat", department="Design", start_date="2020-01-01")), metadata=auth("writer")).guid

        def upload():
            yield pictures_pb2.PutPictureRequest(header=pictures_pb2.PictureHeader(
                guid=target, content_type="image/jpeg", total_size=len(picture)))
            for offset in range(0, len(picture), 10_000):
                yield pictures_pb2.PutPictureRequest(chunk=picture[offset:offset + 10_000])
        stored = self.pictures.PutPicture(upload(), metadata=auth("writer"))
        self.assertEqual(stored.etag, parts[0].etag)
        thumbnail = self.pictures.GetThumbnail(pictures_pb2.GetThumbnailRequest(guid=target), metadata=auth("reader"))
        self.assertEqual(thumbnail.data[:2], b"\xff\xd8")
        self.assertLessEqual(max(thumbnail.width, thumbnail.height), 256)

        unchanged = list(self.pictures.GetPicture(pictures_pb2.GetPictureRequest(guid=target, if_none_match=stored.etag),
                                                  metadata=auth("reader")))
        self.assertEqual(b"".join(p.data for p in unchanged), b"")
        tail = list(self.pictures.GetPicture(pictures_pb2.GetPictureRequest(guid=target, offset=len(picture) - 10),
                                             metadata=auth("reader")))
        self.assertEqual(b"".join(p.data for p in tail), picture[-10:])

        stream = self.pictures.GetPicture(pictures_pb2.GetPictureRequest(guid=target), metadata=auth("reader"))
        next(stream)
        stream.cancel()

        self.assertStatus(grpc.StatusCode.PERMISSION_DENIED, "admin", self.pictures.DeletePicture,
                          pictures_pb2.DeletePictureRequest(guid=target), metadata=auth("writer"))
        self.pictures.DeletePicture(pictures_pb2.DeletePictureRequest(guid=target), metadata=auth("admin"))
        self.assertStatus(grpc.StatusCode.NOT_FOUND, target, self.pictures.GetThumbnail,
                          pictures_pb2.GetThumbnailRequest(guid=target), metadata=auth("reader"))
        self.directory.DeleteEmployee(directory_pb2.DeleteEmployeeRequest(guid=target), metadata=auth("writer"))

    # Analytics.

    def test_analytics(self):
        heads = self.analytics.DepartmentHeadcounts(analytics_pb2.DepartmentHeadcountsRequest(), metadata=auth("reader"))
        names = [d.department for d in heads.departments]
        self.assertEqual(names, sorted(names))
        total = self.directory.CountEmployees(directory_pb2.CountEmployeesRequest(), metadata=auth("reader")).count
        self.assertEqual(sum(d.headcount for d in heads.departments), total)
        summary = self.analytics.DepartmentSummary(analytics_pb2.DepartmentSummaryRequest(department=names[0]),
                                                   metadata=auth("reader"))
        self.assertEqual(summary.total, heads.departments[0].headcount)

        guid = self.guids(1)[0]
        sales = self.analytics.EmployeeSales(analytics_pb2.EmployeeSalesRequest(guid=guid), metadata=auth("reader"))
        count = self.analytics.AggregateSales(analytics_pb2.AggregateSalesRequest(
            function=analytics_pb2.AGGREGATE_FUNCTION_COUNT, employee_guid=guid), metadata=auth("reader"))
        self.assertEqual(count.groups[0].value if count.groups else 0, sales.count)
        median = self.analytics.AggregateSales(analytics_pb2.AggregateSalesRequest(
            function=analytics_pb2.AGGREGATE_FUNCTION_MEDIAN, group_by=analytics_pb2.GROUP_BY_DEPARTMENT),
            metadata=auth("reader"))
        keys = [g.key for g in median.groups]
        self.assertEqual(keys, sorted(keys))
        vacation = self.analytics.AggregateEmployees(analytics_pb2.AggregateEmployeesRequest(
            function=analytics_pb2.AGGREGATE_FUNCTION_SUM, group_by=analytics_pb2.GROUP_BY_DEPARTMENT),
            metadata=auth("admin"))
        # Vacation days are personal: the admin sees the department's sum, a reader does not.
        entitled = self.analytics.DepartmentSummary(analytics_pb2.DepartmentSummaryRequest(department=names[0]),
                                                    metadata=auth("admin"))
        self.assertEqual(vacation.groups[0].value, entitled.vacation_days_total)
        self.assertEqual(summary.vacation_days_total, 0)

        def batches():
            yield analytics_pb2.ImportSalesRequest(sales=[
                analytics_pb2.Sale(employee_guid=guid, amount_cents=1250, date="2024-03-15"),
                analytics_pb2.Sale(employee_guid="00000000-0000-4000-8000-000000000000", amount_cents=100, date="2024-03-15"),
                analytics_pb2.Sale(employee_guid=guid, amount_cents=-1, date="2024-03-15")])
        imported = self.analytics.ImportSales(batches(), metadata=auth("writer"))
        self.assertEqual(imported.inserted, 1)
        self.assertEqual([r.index for r in imported.rejected], [1, 2])
        after = self.analytics.EmployeeSales(analytics_pb2.EmployeeSalesRequest(guid=guid), metadata=auth("reader"))
        self.assertEqual(after.count, sales.count + 1)
        # Money is integer cents: the total moves by exactly the sale's amount.
        self.assertEqual(after.total_amount_cents, sales.total_amount_cents + 1250)

        calendar = self.analytics.SalesCalendar(analytics_pb2.SalesCalendarRequest(employee_guid=guid, year=2024, month=3),
                                                metadata=auth("reader"))
        self.assertIn(15, [d.day for d in calendar.days])
        year = next(y for y in calendar.years if y.year == 2024)
        self.assertEqual(year.count, sum(m.count for m in year.months))
        self.assertEqual(year.amount_cents, sum(m.amount_cents for m in year.months))
        march = next(m for m in year.months if m.month == 3)
        self.assertGreaterEqual(march.amount_cents, 1250)

        deleted = self.analytics.DeleteSales(analytics_pb2.DeleteSalesRequest(before_date="1995-01-01", limit=3),
                                             metadata=auth("admin"))
        self.assertLessEqual(deleted.deleted, 3)

    # Metrics, last (test names run in order), so every kind of call has happened.

    def test_zz_metrics(self):
        list(self.pictures.GetPicture(pictures_pb2.GetPictureRequest(guid=next(
            e.guid for e in self.directory.ListEmployees(directory_pb2.ListEmployeesRequest(page_size=50),
                                                        metadata=auth("reader")).employees if e.has_picture)),
            metadata=auth("reader")))
        def scrape():
            with urllib.request.urlopen(METRICS_URL, timeout=10) as response:
                self.assertEqual(response.status, 200)
                text = response.read().decode()
            samples = {}
            for line in text.splitlines():
                if line and not line.startswith("#"):
                    name, _, value = line.rpartition(" ")
                    samples[name] = float(value)
            return text, samples
        # The first background checkpoint comes after the start-up picture sweep (SQLite).
        for _ in range(100):
            text, samples = scrape()
            if "roster_wal_checkpoints_total" in samples or BACKEND:
                break
            time.sleep(0.1)
        count = 'roster_rpc_requests_total{method="roster.v1.Directory/CountEmployees",status="OK"}'
        self.assertGreaterEqual(samples.get(count, 0), 1, text[:2000])
        denied = 'roster_rpc_requests_total{method="roster.v1.Directory/CreateEmployee",status="PERMISSION_DENIED"}'
        self.assertGreaterEqual(samples.get(denied, 0), 1)
        names = {name.split("{")[0] for name in samples}
        # Every backend: the group-commit writer's queue, batches and commits.
        expected = ["roster_rpc_duration_seconds_bucket", "roster_writer_queue_wait_seconds_count",
                    "roster_write_batch_size_count", "roster_commits_total"]
        if not BACKEND:  # SQLite's own: reader connections, the picture cache, the WAL.
            expected += ["roster_reader_wait_seconds_count", "roster_picture_cache_hits_total",
                         "roster_picture_cache_misses_total", "roster_wal_checkpoints_total", "roster_wal_bytes"]
        for metric in expected:
            self.assertIn(metric, names)
        with self.assertRaises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(METRICS_URL.replace("/metrics", "/nope"), timeout=10)
        self.assertEqual(missing.exception.code, 404)

    # Documented error statuses, each naming its field, none leaking SQL.

    def test_sigterm_while_starting(self):
        """A SIGTERM that comes while the server seeds its demo data, before it listens, stops it
        cleanly, on either backend (it once waited for good, on PostgreSQL, for the address it would
        never have; and SQLite seeded before the services started, where a SIGTERM killed it)."""
        work = tempfile.mkdtemp(prefix="roster-early-sigterm-", dir=WORK)
        with open(os.path.join(work, "server.log"), "w") as log:
            server = subprocess.Popen(
                [ROSTER, "serve", "--port", "0", "--db", os.path.join(work, "early.sqlite"), "--seed-employees",
                 "20000", "--no-seed-pictures", "--metrics-port", "0"]
                + [arg.replace("interop_", "early_") for arg in BACKEND],
                stdout=subprocess.PIPE, stderr=log, text=True)
            # The metrics endpoint is up as soon as the server's services start, before the seed.
            line = server.stdout.readline()
            self.assertTrue(line.startswith("metrics on "), line)
            server.send_signal(signal.SIGTERM)
            try:
                code = server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
                self.fail("the server did not stop within 30 s of a SIGTERM while it started")
            finally:
                server.stdout.close()
        with open(os.path.join(work, "server.log")) as log:
            self.assertEqual(code, 0, log.read()[-2000:])

    def test_errors(self):
        reader, writer = auth("reader"), auth("writer")
        code = grpc.StatusCode
        self.assertStatus(code.INVALID_ARGUMENT, "guid", self.directory.GetEmployee,
                          directory_pb2.GetEmployeeRequest(guid="not-a-uuid"), metadata=reader)
        self.assertStatus(code.NOT_FOUND, "00000000-0000-4000-8000-000000000001", self.directory.GetEmployee,
                          directory_pb2.GetEmployeeRequest(guid="00000000-0000-4000-8000-000000000001"), metadata=reader)
        self.assertStatus(code.INVALID_ARGUMENT, "page_size", self.directory.ListEmployees,
                          directory_pb2.ListEmployeesRequest(page_size=-1), metadata=reader)
        self.assertStatus(code.INVALID_ARGUMENT, "page_token", self.directory.ListEmployees,
                          directory_pb2.ListEmployeesRequest(page_token="garbage"), metadata=reader)
        existing = self.guids(1)[0]
        self.assertStatus(code.ALREADY_EXISTS, existing, self.directory.CreateEmployee,
                          directory_pb2.CreateEmployeeRequest(employee=types_pb2.Employee(
                              guid=existing, name="Dup", department="Design", start_date="2020-01-01")), metadata=writer)
        self.assertStatus(code.INVALID_ARGUMENT, "start_date", self.directory.CreateEmployee,
                          directory_pb2.CreateEmployeeRequest(employee=types_pb2.Employee(
                              name="Bad Date", department="Design", start_date="2023-02-30")), metadata=writer)
        self.assertStatus(code.INVALID_ARGUMENT, "sales_count", self.directory.UpdateEmployee,
                          directory_pb2.UpdateEmployeeRequest(employee=types_pb2.Employee(guid=existing),
                                                              update_mask=field_mask_pb2.FieldMask(paths=["sales_count"])),
                          metadata=writer)
        self.assertStatus(code.INVALID_ARGUMENT, "all", self.directory.BatchUpdateEmployees,
                          directory_pb2.BatchUpdateEmployeesRequest(set_vacation_days=1), metadata=auth("admin"))
        self.assertStatus(code.INVALID_ARGUMENT, "after_token", self.directory.WatchChanges,
                          directory_pb2.WatchChangesRequest(after_token="x"), metadata=reader)
        self.assertStatus(code.OUT_OF_RANGE, "after_token", self.directory.WatchChanges,
                          directory_pb2.WatchChangesRequest(after_token="999999999999"), metadata=reader)
        self.assertStatus(code.INVALID_ARGUMENT, "function", self.analytics.AggregateSales,
                          analytics_pb2.AggregateSalesRequest(), metadata=reader)
        self.assertStatus(code.INVALID_ARGUMENT, "from_date", self.analytics.AggregateSales,
                          analytics_pb2.AggregateSalesRequest(function=analytics_pb2.AGGREGATE_FUNCTION_SUM,
                                                              from_date="2024-05-01", to_date="2024-04-01"), metadata=reader)
        self.assertStatus(code.INVALID_ARGUMENT, "month", self.analytics.SalesCalendar,
                          analytics_pb2.SalesCalendarRequest(month=3), metadata=reader)
        self.assertStatus(code.NOT_FOUND, "Nowhere", self.analytics.DepartmentSummary,
                          analytics_pb2.DepartmentSummaryRequest(department="Nowhere"), metadata=reader)
        self.assertStatus(code.NOT_FOUND, "00000000-0000-4000-8000-000000000001", self.pictures.GetThumbnail,
                          pictures_pb2.GetThumbnailRequest(guid="00000000-0000-4000-8000-000000000001"), metadata=reader)


if __name__ == "__main__":
    unittest.main(verbosity=2)
