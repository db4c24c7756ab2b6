#!/usr/bin/env python3
"""Tracing through a collector nobody here wrote the protocol of: a small OTLP/gRPC receiver
built from PyPI's opentelemetry-proto (the TraceService that every collector serves) and
grpcio. `roster serve --otlp-endpoint` exports to it.

Checks, each call carrying a W3C traceparent of its own:
- GetEmployee over gRPC (grpcio metadata): a server span named by the method, in the caller's
  trace, whose parent is the caller's span, with rpc.* attributes and status code 0; the
  store's read as its child (sqlite.read, and the lane's wait when the read has one);
- Health.Check over gRPC, which the fast path answers without a task of its own
  (`interceptNow`): its server span, in the caller's trace, with its status code;
- UpdateEmployee over the Connect protocol (curl, the HTTP header): the server span in the
  caller's trace; the write's spans (wait, statements, commit) as its children;
- StreamEmployees over gRPC: the server span lasts until the stream's end and the reads of
  its pages (4 pages a read) are its children;
- GetEmployee of an unknown guid: status code 5 on the span, which stays unset (a client's
  error, as OpenTelemetry's conventions say);
- a call whose caller did not sample it (traceparent flags 00) exports nothing;
- the request log lines of these calls carry their trace ids;
- a server started without an endpoint exports nothing.

With ROSTER_TRACING_POSTGRES set to a PostgreSQL URL (scripts/postgres), the server runs on
PostgreSQL and the store's spans are its queries and writes.

Usage: python3 Tests/Interop/tracing/tracing_test.py ROSTER_BINARY
"""
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

ROSTER = os.path.abspath(sys.argv[1])
WORK = tempfile.mkdtemp(prefix="roster-tracing-")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import rosterstubs  # noqa: E402
import servers  # noqa: E402

rosterstubs.generate(WORK, ["types.proto", "directory.proto"])
from roster.v1 import directory_pb2, directory_pb2_grpc  # noqa: E402

HANG = 60
POSTGRES = os.environ.get("ROSTER_TRACING_POSTGRES")
READ = "postgres.query" if POSTGRES else "sqlite.read"
WRITES = {"postgres.write"} if POSTGRES else {"sqlite.writer.wait", "sqlite.write", "sqlite.commit"}
SERVER, INTERNAL = 2, 1  # Span.SpanKind values


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    """Keeps every span exported to it."""

    def __init__(self):
        self.lock = threading.Lock()
        self.spans = []
        self.resources = []

    def Export(self, request, context):
        with self.lock:
            for resource_spans in request.resource_spans:
                self.resources.append(resource_spans.resource)
                for scope_spans in resource_spans.scope_spans:
                    self.spans.extend(scope_spans.spans)
        return trace_service_pb2.ExportTraceServiceResponse()

    def trace(self, trace_id):
        with self.lock:
            return [span for span in self.spans if span.trace_id.hex() == trace_id]

    def wait(self, trace_id, name, want=lambda spans: True):
        """The spans of `trace_id` once one is named `name` and `want` holds of them."""
        deadline = time.monotonic() + HANG
        while time.monotonic() < deadline:
            spans = self.trace(trace_id)
            if any(span.name == name for span in spans) and want(spans):
                return spans
            time.sleep(0.1)
        raise AssertionError(f"no span {name} in trace {trace_id} within {HANG} s: "
                             f"{[(s.name, s.span_id.hex(), s.parent_span_id.hex()) for s in self.trace(trace_id)]}")



def traceparent(n):
    trace_id = f"{n:02x}" * 16
    parent = f"{n + 0x40:02x}" * 8
    return trace_id, parent, f"00-{trace_id}-{parent}-01"


def attributes(span):
    values = {}
    for attribute in span.attributes:
        value = attribute.value
        values[attribute.key] = getattr(value, value.WhichOneof("value")) if value.WhichOneof("value") else None
    return values


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def serve(args, log):
    port = servers.free_port()
    environment = dict(os.environ, OTEL_BSP_SCHEDULE_DELAY="100")
    environment.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    environment.pop("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", None)
    server = subprocess.Popen(
        [ROSTER, "serve", "--port", str(port), "--seed-employees", "200", "--no-seed-pictures"]
        + (["--postgres", POSTGRES, "--postgres-schema", f"tracing_{port}"] if POSTGRES
           else ["--db", os.path.join(WORK, f"roster-{port}.sqlite")])
        + args,
        stdout=subprocess.PIPE, stderr=log, text=True, env=environment)
    line = server.stdout.readline()
    if not line.startswith("listening on "):
        server.kill()
        raise SystemExit(f"the server did not start; see {log.name}")
    return server, f"127.0.0.1:{port}"


def main():
    receiver = Receiver()
    collector = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(receiver, collector)
    collector_port = collector.add_insecure_port("127.0.0.1:0")
    collector.start()
    log = open(os.path.join(WORK, "serve.log"), "w+")
    server = None
    try:
        server, address = serve(["--otlp-endpoint", f"http://127.0.0.1:{collector_port}"], log)
        channel = grpc.insecure_channel(address)
        directory = directory_pb2_grpc.DirectoryStub(channel)
        guid = directory.ListEmployees(directory_pb2.ListEmployeesRequest(page_size=1), timeout=HANG).employees[0].guid

        # GetEmployee over gRPC.
        trace_id, parent, header = traceparent(0x11)
        directory.GetEmployee(directory_pb2.GetEmployeeRequest(guid=guid), metadata=[("traceparent", header)], timeout=HANG)
        method = "roster.v1.Directory/GetEmployee"
        spans = receiver.wait(trace_id, method, lambda spans: any(s.name == READ for s in spans))
        rpc = next(span for span in spans if span.name == method)
        check(rpc.kind == SERVER, f"the RPC span's kind is {rpc.kind}, not SERVER")
        check(rpc.parent_span_id.hex() == parent, f"the RPC span's parent is {rpc.parent_span_id.hex()}, not {parent}")
        values = attributes(rpc)
        check(values.get("rpc.system") == "grpc" and values.get("rpc.service") == "roster.v1.Directory"
              and values.get("rpc.method") == "GetEmployee" and values.get("rpc.grpc.status_code") == 0,
              f"the RPC span's attributes: {values}")
        read = next(span for span in spans if span.name == READ)
        check(read.parent_span_id == rpc.span_id, f"{READ} is not a child of the RPC span")
        check(read.start_time_unix_nano >= rpc.start_time_unix_nano and read.end_time_unix_nano <= rpc.end_time_unix_nano,
              f"{READ} is not within the RPC span")
        print(f"GetEmployee over gRPC: {sorted(span.name for span in spans)}", flush=True)

        # Health.Check, answered without a task: the same span, from the interceptors' form
        # for calls that never wait.
        trace_id, parent, header = traceparent(0x12)
        health = health_pb2_grpc.HealthStub(channel)
        health.Check(health_pb2.HealthCheckRequest(), metadata=[("traceparent", header)], timeout=HANG)
        method = "grpc.health.v1.Health/Check"
        spans = receiver.wait(trace_id, method)
        rpc = next(span for span in spans if span.name == method)
        check(rpc.kind == SERVER and rpc.parent_span_id.hex() == parent,
              f"Health.Check's span: kind {rpc.kind}, parent {rpc.parent_span_id.hex()}, not {parent}")
        values = attributes(rpc)
        check(values.get("rpc.method") == "Check" and values.get("rpc.grpc.status_code") == 0,
              f"Health.Check's span attributes: {values}")
        try:
            health.Check(health_pb2.HealthCheckRequest(service="nope"), metadata=[("traceparent", traceparent(0x13)[2])],
                         timeout=HANG)
            raise AssertionError("Health.Check of an unknown service succeeded")
        except grpc.RpcError as error:
            check(error.code() == grpc.StatusCode.NOT_FOUND, f"unknown service: {error.code()}")
        spans = receiver.wait(traceparent(0x13)[0], method)
        check(attributes(spans[0]).get("rpc.grpc.status_code") == 5, f"NOT_FOUND on Health.Check's span: {attributes(spans[0])}")
        print("Health.Check over gRPC: its span, and NOT_FOUND on it", flush=True)

        # UpdateEmployee over Connect, the traceparent an HTTP header.
        trace_id, parent, header = traceparent(0x22)
        body = '{"employee": {"guid": "%s", "vacationDays": 7}, "updateMask": "vacationDays"}' % guid
        reply = subprocess.run(
            ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "content-type: application/json",
             "-H", f"traceparent: {header}", "-d", body, f"http://{address}/roster.v1.Directory/UpdateEmployee"],
            capture_output=True, text=True, timeout=HANG)
        check(reply.stdout == "200", f"UpdateEmployee over Connect: HTTP {reply.stdout}")
        method = "roster.v1.Directory/UpdateEmployee"
        spans = receiver.wait(trace_id, method, lambda spans: WRITES <= {s.name for s in spans})
        rpc = next(span for span in spans if span.name == method)
        check(rpc.parent_span_id.hex() == parent, "the Connect call's span is not the caller's child")
        for span in spans:
            if span.name in WRITES:
                check(span.parent_span_id == rpc.span_id, f"{span.name} is not a child of the RPC span")
        print(f"UpdateEmployee over Connect: {sorted(span.name for span in spans)}", flush=True)

        # StreamEmployees: the span lasts until the stream ends; every page's read is a child.
        trace_id, parent, header = traceparent(0x33)
        pages = list(directory.StreamEmployees(directory_pb2.ListEmployeesRequest(page_size=50),
                                               metadata=[("traceparent", header)], timeout=HANG))
        method = "roster.v1.Directory/StreamEmployees"
        # A stream reads 4 pages of 50 in one read (docs/architecture.md, "StreamEmployees").
        reads_wanted = -(-len(pages) // 4)
        spans = receiver.wait(trace_id, method,
                              lambda spans: sum(s.name == READ for s in spans) >= reads_wanted)
        rpc = next(span for span in spans if span.name == method)
        reads = [span for span in spans if span.name == READ and span.parent_span_id == rpc.span_id]
        check(len(reads) >= reads_wanted,
              f"{len(reads)} reads under the stream's span for {len(pages)} pages, 4 a read")
        check(max(span.end_time_unix_nano for span in reads) <= rpc.end_time_unix_nano,
              "the stream's span ended before its last page was read")
        print(f"StreamEmployees: {len(pages)} pages, {len(reads)} reads under the stream's span", flush=True)

        # A client's error: the code on the span, the status unset.
        trace_id, parent, header = traceparent(0x44)
        try:
            directory.GetEmployee(directory_pb2.GetEmployeeRequest(guid="00000000-0000-4000-8000-000000000044"),
                                  metadata=[("traceparent", header)], timeout=HANG)
            raise AssertionError("GetEmployee of an unknown guid succeeded")
        except grpc.RpcError as error:
            check(error.code() == grpc.StatusCode.NOT_FOUND, f"unknown guid: {error.code()}")
        spans = receiver.wait(trace_id, "roster.v1.Directory/GetEmployee")
        rpc = next(span for span in spans if span.name == "roster.v1.Directory/GetEmployee")
        check(attributes(rpc).get("rpc.grpc.status_code") == 5, f"NOT_FOUND on the span: {attributes(rpc)}")
        check(rpc.status.code == 0, f"a client's error marked the span {rpc.status}")

        # A caller that did not sample its trace (flags 00): nothing of the call is exported.
        trace_id, parent, header = traceparent(0x66)
        directory.GetEmployee(directory_pb2.GetEmployeeRequest(guid=guid),
                              metadata=[("traceparent", header[:-2] + "00")], timeout=HANG)
        # A sampled call after it: once its spans arrive, any of the first call's would have.
        marker_trace, _, marker = traceparent(0x77)
        directory.GetEmployee(directory_pb2.GetEmployeeRequest(guid=guid), metadata=[("traceparent", marker)], timeout=HANG)
        receiver.wait(marker_trace, "roster.v1.Directory/GetEmployee")
        check(not receiver.trace(trace_id), f"an unsampled call exported {[s.name for s in receiver.trace(trace_id)]}")

        check(any(attribute.key == "service.name" and attribute.value.string_value == "roster"
                  for resource in receiver.resources for attribute in resource.attributes),
              "the resource does not name the service roster")
        channel.close()
        servers.stop(server)
        server = None
        log.seek(0)
        lines = log.read()
        for n in (0x11, 0x22, 0x33, 0x44):
            check(f"{n:02x}" * 16 in lines, f"no log line carries the trace id {f'{n:02x}' * 16}")
        print("the request log lines carry their trace ids", flush=True)

        # Without an endpoint nothing is exported.
        before = len(receiver.spans)
        quiet, address = serve([], log)
        channel = grpc.insecure_channel(address)
        trace_id, parent, header = traceparent(0x55)
        directory_pb2_grpc.DirectoryStub(channel).GetEmployee(
            directory_pb2.GetEmployeeRequest(guid=guid), metadata=[("traceparent", header)], timeout=HANG)
        channel.close()
        servers.stop(quiet)
        check(len(receiver.spans) == before and not receiver.trace(trace_id), "a server without an endpoint exported spans")
        print("tracing test passed")
    finally:
        if server is not None:
            server.kill()
            server.wait()
        collector.stop(None)
        log.close()
        shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()
