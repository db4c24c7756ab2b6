#!/usr/bin/env python3
"""Roster vs a grpc-go peer vs a C++ gRPC peer: GetEmployee, ListEmployees (the first page of 50)
and Health.Check with h2load.

    python3 Benchmarks/peers/bench.py [--rounds 3] [--quick] [--pin] [--json FILE]
    python3 Benchmarks/peers/bench.py --summarize FILE        # the tables again, from a JSON file

Run from the Roster project root after build.sh and verify.py (`run` does all of it). One server
runs at a time. Each round starts every server in turn (the order rotates from round to round),
records its idle memory after startup, warms it up (not measured), then runs h2load (1 thread)
for GetEmployee and Health.Check at 16 connections x 16 streams and at 1 x 1, reading the
server's utime+stime from /proc/PID/stat around each run and VmRSS from /proc/PID/status after
it; then its memory 3 s after the load, and the server is stopped by its PID.

Before each start and each h2load run the machine should be quiet: no swift-build,
swift-frontend or swiftc process, and under 0.3 of a core busy over one second. If it is still
busy after 60 s, the benchmark goes on without waiting again and says so under the table.
"""
import argparse, json, os, re, resource, sqlite3, statistics, struct, subprocess, sys, time

from servers import CLK_TCK, DB, LABEL, NO_THUMBNAIL_MASK, ROSTER, WORK, Server, stop_on_sigterm

GET = "/roster.v1.Directory/GetEmployee"
HC = "/grpc.health.v1.Health/Check"
LIST = "/roster.v1.Directory/ListEmployees"
# The same path with another body: the listing without thumbnails (`#` and after are not sent).
LIST_NO_THUMBNAIL = LIST + "#without-thumbnails"
STREAM = "/roster.v1.Directory/StreamEmployees"
PLANS = {
    "full": {
        "rounds": 3,
        # (key, path, connections, streams per connection, requests)
        "scenarios": [("get_16x16", GET, 16, 16, 40000), ("hc_16x16", HC, 16, 16, 40000),
                      ("get_1x1", GET, 1, 1, 10000), ("hc_1x1", HC, 1, 1, 10000),
                      ("list_16x16", LIST, 16, 16, 10000), ("list_no_thumbnail_16x16", LIST_NO_THUMBNAIL, 16, 16, 10000),
                      ("stream_1x1", STREAM, 1, 1, 6)],
        "warmup": [(GET, 16, 16, 5000), (HC, 16, 16, 5000), (GET, 1, 1, 500), (LIST, 16, 16, 1000),
                   (LIST_NO_THUMBNAIL, 16, 16, 1000), (STREAM, 1, 1, 1)],
    },
    "quick": {
        "rounds": 1,
        "smoke": True,
        # Enough calls for every row to have a figure; CI reads none of them as a speed.
        "scenarios": [("get_16x16", GET, 16, 16, 3000), ("hc_16x16", HC, 16, 16, 3000),
                      ("get_1x1", GET, 1, 1, 300), ("hc_1x1", HC, 1, 1, 300),
                      ("list_16x16", LIST, 16, 16, 500), ("list_no_thumbnail_16x16", LIST_NO_THUMBNAIL, 16, 16, 500),
                      ("stream_1x1", STREAM, 1, 1, 1)],
        "warmup": [(GET, 16, 16, 300), (HC, 16, 16, 300), (GET, 1, 1, 50), (LIST, 16, 16, 50),
                   (LIST_NO_THUMBNAIL, 16, 16, 50), (STREAM, 1, 1, 1)],
    },
}
SERVERS = ("roster", "go", "cpp")
QUIET_TIMEOUT_S = 60
QUIET_CORES = 0.3
SWIFT_TOOLS = {"swift-build", "swift-frontend", "swiftc", "swift-driver", "swift-test"}
H2LOAD_TIMEOUT_S = 300
PIN = {}  # --pin: {"server": "1", "client": "0"}


class BenchError(Exception):
    pass


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


def rel(path):
    """A path for people to read: relative to the current directory when it lies below it."""
    r = os.path.relpath(path)
    return path if r.startswith("..") else r


# --- a quiet machine --------------------------------------------------------------------------

def machine_busy_ticks():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v[:8]) - v[3] - v[4]


def children_cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def busy_cores(seconds=1.0):
    def snap():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v[:8]), v[3] + v[4]
    t0, i0 = snap()
    time.sleep(seconds)
    t1, i1 = snap()
    total = t1 - t0
    return 0.0 if total == 0 else (total - (i1 - i0)) / total * os.cpu_count()


def swift_builds():
    """PIDs of running Swift builds and compilers (argv[0] is one of SWIFT_TOOLS, or `swift build|test|run`)."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        exe = os.path.basename(argv[0]).decode(errors="replace")
        if exe in SWIFT_TOOLS or (exe == "swift" and len(argv) > 1 and argv[1] in (b"build", b"test", b"run")):
            found.append(int(d))
    return found


class Quiet:
    """Waits for a quiet machine, at most `timeout_s` once; after that it only notes busy runs."""

    def __init__(self, timeout_s=QUIET_TIMEOUT_S):
        self.timeout_s = timeout_s
        self.checks = 0
        self.waited_s = 0.0
        self.gave_up = None  # what we were about to do when the wait timed out
        self.busy = []       # what ran on a busy machine after that

    def wait(self, what):
        """Returns the cores busy just before `what`, after waiting for them to drop if need be."""
        start, next_note, noted = time.time(), 0.0, False
        self.checks += 1
        while True:
            builds, busy = swift_builds(), busy_cores()
            quiet = not builds and busy < QUIET_CORES
            waited = time.time() - start
            if quiet or self.gave_up or waited >= self.timeout_s:
                break
            if waited >= next_note:
                with open("/proc/loadavg") as f:
                    load = " ".join(f.read().split()[:3])
                log(f"  busy before {what}: {self._why(builds, busy)}, load {load}; "
                    f"waiting (at most {self.timeout_s} s)")
                next_note, noted = waited + 30, True
            time.sleep(4)
        self.waited_s += waited
        if quiet:
            if noted:
                log(f"  quiet after {waited:.0f} s of waiting ({what})")
            return busy
        self.busy.append({"what": what, "busy_cores": round(busy, 2), "swift_builds": len(builds)})
        if not self.gave_up:
            self.gave_up = what
            log(f"  machine still busy after {self.timeout_s} s ({self._why(builds, busy)}); measuring anyway, "
                "without waiting again: these numbers are low and noisy")
        return busy

    @staticmethod
    def _why(builds, busy):
        return (f"{len(builds)} Swift build process(es), " if builds else "") + f"{busy:.2f} cores busy"

    def report(self):
        return {"timeout_s": self.timeout_s, "threshold_cores": QUIET_CORES, "checks": self.checks,
                "waited_s": round(self.waited_s, 1), "gave_up_before": self.gave_up, "busy_runs": self.busy}


# --- h2load -------------------------------------------------------------------------------------

def body(path, msg):
    b = msg.SerializeToString()
    with open(path, "wb") as f:
        f.write(b"\x00" + struct.pack(">I", len(b)) + b)
    return path


def prepare_bodies(guid):
    """The 5-byte-prefixed request files h2load sends, under $PEERS_WORK/bodies."""
    from roster.v1 import directory_pb2  # from build.sh
    from google.protobuf import field_mask_pb2
    from grpc_health.v1 import health_pb2
    d = os.path.join(WORK, "bodies")
    os.makedirs(d, exist_ok=True)
    return {GET: body(os.path.join(d, "get.bin"), directory_pb2.GetEmployeeRequest(guid=guid)),
            HC: body(os.path.join(d, "hc.bin"), health_pb2.HealthCheckRequest()),
            LIST: body(os.path.join(d, "list.bin"), directory_pb2.ListEmployeesRequest(page_size=50)),
            LIST_NO_THUMBNAIL: body(os.path.join(d, "list-no-thumbnail.bin"), directory_pb2.ListEmployeesRequest(
                page_size=50, read_mask=field_mask_pb2.FieldMask(paths=NO_THUMBNAIL_MASK))),
            # The whole listing, pages of 50.
            STREAM: body(os.path.join(d, "stream.bin"), directory_pb2.ListEmployeesRequest(page_size=50))}


def middle_guid():
    con = sqlite3.connect(f"file:{DB}?mode=ro", uri=True)
    try:
        count = con.execute("SELECT count(*) FROM employees").fetchone()[0]
        guid = con.execute("SELECT guid FROM employees ORDER BY id LIMIT 1 OFFSET ?", (count // 2,)).fetchone()[0]
    finally:
        con.close()
    return count, guid


def to_us(t):
    for unit, k in (("us", 1.0), ("ms", 1000.0), ("s", 1e6)):
        if t.endswith(unit):
            return float(t[: -len(unit)]) * k
    raise ValueError(t)


def h2load(target, path, data, c, m, n):
    cmd = (["taskset", "-c", PIN["client"]] if PIN else []) + [
        "h2load", "-n", str(n), "-c", str(c), "-m", str(m), "-t", "1",
        "-H", "content-type: application/grpc", "-H", "te: trailers", "-d", data,
        f"http://{target}{path.split('#')[0]}"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                             timeout=H2LOAD_TIMEOUT_S).stdout
    except subprocess.TimeoutExpired:
        raise BenchError(f"h2load ran past {H2LOAD_TIMEOUT_S} s: {' '.join(cmd)}")
    try:
        qps = float(re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out).group(1))
        mean = to_us(re.search(r"time for request:\s+\S+\s+\S+\s+(\S+)", out).group(1))
        ok = int(re.search(r"(\d+) succeeded", out).group(1))
        data_bytes = int(re.search(r"traffic: .*?\((\d+)\) data", out).group(1))
    except AttributeError:
        raise BenchError("could not parse h2load's output:\n" + out)
    if ok != n:
        raise BenchError(f"h2load: only {ok}/{n} requests succeeded\n{out}")
    return {"qps": qps, "mean_us": mean, "data_bytes_per_req": data_bytes / n}


# --- one server -----------------------------------------------------------------------------------

def measure_server(name, files, round_no, plan, quiet):
    quiet.wait(f"starting {name}")
    srv = Server(name, cpus=PIN.get("server")).start()
    try:
        time.sleep(2)
        rec = {"server": name, "round": round_no, "pid": srv.pid, "cmd": srv.cmd, "mem_startup": srv.memory()}
        t0 = srv.cpu_ticks()
        time.sleep(3)
        rec["idle_cpu_ms_per_s_startup"] = (srv.cpu_ticks() - t0) / CLK_TCK * 1000 / 3
        for path, c, m, n in plan["warmup"]:
            h2load(srv.target, path, files[path], c, m, n)
        rec["mem_after_warmup"] = srv.memory()
        rec["runs"] = {}
        for key, path, c, m, n in plan["scenarios"]:
            busy = quiet.wait(f"{name} {key}")
            t0, m0, k0 = srv.cpu_ticks(), machine_busy_ticks(), children_cpu_s()
            refused = srv.calls_not_ok()
            r = h2load(srv.target, path, files[path], c, m, n)
            t1, m1, k1 = srv.cpu_ticks(), machine_busy_ticks(), children_cpu_s()
            if refused is not None:
                # A refusal (RESOURCE_EXHAUSTED past a full queue) costs less than an answer:
                # counted as a call, it would flatter the figure. The quick run (a debug build,
                # every row produced) only reports them.
                r["calls_not_ok"] = int(srv.calls_not_ok() - refused)
                if r["calls_not_ok"] and not plan.get("smoke"):
                    raise BenchError(f"{name} {key}: {r['calls_not_ok']} of {n} calls ended other than OK "
                                     "(h2load counts them as succeeded)")
            r["requests"] = n
            r["cpu_us_per_req"] = (t1 - t0) / CLK_TCK * 1e6 / n
            r["h2load_cpu_us_per_req"] = (k1 - k0) * 1e6 / n
            # machine-wide busy CPU that was neither the server nor h2load (other processes, kernel threads)
            r["other_cpu_ms"] = ((m1 - m0) / CLK_TCK - (t1 - t0) / CLK_TCK - (k1 - k0)) * 1000
            r["cpu_ticks"] = t1 - t0
            r["busy_cores_before"] = round(busy, 3)
            r["mem"] = srv.memory()
            rec["runs"][key] = r
            log(f"  r{round_no} {name:6} {key:9} {r['qps']:9.0f} req/s  mean {r['mean_us']:8.1f} us  "
                f"cpu {r['cpu_us_per_req']:6.1f} us/req  RSS {r['mem']['VmRSS'] / 1024:6.1f} MiB  "
                f"{r['data_bytes_per_req']:.0f} B/resp  h2load {r['h2load_cpu_us_per_req']:.1f} us/req  "
                f"other {r['other_cpu_ms']:.0f} ms")
        t0 = srv.cpu_ticks()
        time.sleep(3)
        rec["idle_cpu_ms_per_s_after"] = (srv.cpu_ticks() - t0) / CLK_TCK * 1000 / 3
        rec["mem_after_load"] = srv.memory()
        return rec
    finally:
        srv.stop()


# --- summary ------------------------------------------------------------------------------------

def summarize(res):
    """Medians per server of what the short table shows, and Roster's ratios to each peer."""
    summary = {}
    for n in SERVERS:
        rs = [r for r in res["records"] if r["server"] == n]
        if not rs:
            continue

        def med(f):
            return statistics.median(f(r) for r in rs)
        summary[n] = {
            "rounds": len(rs),
            "get_qps_16x16": med(lambda r: r["runs"]["get_16x16"]["qps"]),
            "health_qps_16x16": med(lambda r: r["runs"]["hc_16x16"]["qps"]),
            "get_mean_us_1x1": med(lambda r: r["runs"]["get_1x1"]["mean_us"]),
            "health_mean_us_1x1": med(lambda r: r["runs"]["hc_1x1"]["mean_us"]),
            "get_cpu_us_per_req_16x16": med(lambda r: r["runs"]["get_16x16"]["cpu_us_per_req"]),
            "health_cpu_us_per_req_16x16": med(lambda r: r["runs"]["hc_16x16"]["cpu_us_per_req"]),
            "list_qps_16x16": med(lambda r: r["runs"]["list_16x16"]["qps"]) if all("list_16x16" in r["runs"] for r in rs) else 0,
            "list_cpu_us_per_req_16x16": med(lambda r: r["runs"]["list_16x16"]["cpu_us_per_req"]) if all("list_16x16" in r["runs"] for r in rs) else 0,
            "list_no_thumbnail_qps_16x16": med(lambda r: r["runs"]["list_no_thumbnail_16x16"]["qps"]) if all("list_no_thumbnail_16x16" in r["runs"] for r in rs) else 0,
            "list_no_thumbnail_cpu_us_per_req_16x16": med(lambda r: r["runs"]["list_no_thumbnail_16x16"]["cpu_us_per_req"]) if all("list_no_thumbnail_16x16" in r["runs"] for r in rs) else 0,
            # One StreamEmployees call streams the whole listing: seconds and CPU ms per stream.
            "stream_s_1x1": med(lambda r: r["runs"]["stream_1x1"]["mean_us"] / 1e6) if all("stream_1x1" in r["runs"] for r in rs) else 0,
            "stream_cpu_ms_1x1": med(lambda r: r["runs"]["stream_1x1"]["cpu_us_per_req"] / 1000) if all("stream_1x1" in r["runs"] for r in rs) else 0,
            "rss_startup_mib": med(lambda r: r["mem_startup"]["VmRSS"] / 1024),
            "rss_after_load_mib": med(lambda r: r["mem_after_load"]["VmRSS"] / 1024),
            "threads_under_load": med(lambda r: r["runs"]["get_16x16"]["mem"]["Threads"]),
        }
    ratios = {}
    if "roster" in summary:
        ro = summary["roster"]
        for p in ("go", "cpp"):
            if p in summary:
                pe = summary[p]
                ratios[f"roster_over_{p}"] = {
                    "get_qps": ro["get_qps_16x16"] / pe["get_qps_16x16"],
                    "get_cpu_us_per_req": (ro["get_cpu_us_per_req_16x16"] / pe["get_cpu_us_per_req_16x16"]
                                           if pe["get_cpu_us_per_req_16x16"] else None),
                }
    return summary, ratios


def where(res):
    pin = res.get("pin") or {}
    if pin:
        return f"server pinned to CPU {pin['server']}, h2load to CPU {pin['client']}"
    cpus = (res.get("env") or {}).get("cpus")
    return f"server and h2load share the {cpus} CPUs" if cpus else "server and h2load share the CPUs"


def table(res):
    """The short markdown table `run` prints."""
    summary, ratios = summarize(res)
    plan = res.get("plan") or {}
    sc = {k: n for k, _, _, _, n in plan.get("scenarios", [])} or {"get_16x16": 40000, "get_1x1": 3000}
    roster = res.get("roster") or {}
    env = res.get("env") or {}
    head = f"Roster {roster.get('commit') or '(commit unknown)'}"
    if env.get("employees"):
        head += f", {env['employees']:,} employees"
    rounds = res.get("rounds", 1)
    head += f", {rounds} round{'s' if rounds != 1 else ''}{' (--quick)' if res.get('quick') else ''}, {where(res)}"
    head += "; medians" if rounds > 1 else ""
    lines = [head, "",
             "| server | GetEmployee QPS 16×16 | Health QPS 16×16 | GetEmployee mean µs 1×1 | Health mean µs 1×1 "
             "| CPU µs/req GetEmployee | CPU µs/req Health | RSS after load MiB | ListEmployees (50) QPS 16×16 | CPU µs/req ListEmployees "
             "| ListEmployees (50) without thumbnails QPS 16×16 | StreamEmployees s 1×1 | CPU ms per StreamEmployees |",
             "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for n, s in summary.items():
        lines.append(f"| {LABEL[n]} | {s['get_qps_16x16']:,.0f} | {s['health_qps_16x16']:,.0f} | "
                     f"{s['get_mean_us_1x1']:,.0f} | {s['health_mean_us_1x1']:,.0f} | "
                     f"{s['get_cpu_us_per_req_16x16']:.1f} | {s['health_cpu_us_per_req_16x16']:.1f} | "
                     f"{s['rss_after_load_mib']:.1f} | {s.get('list_qps_16x16', 0):,.0f} | "
                     f"{s.get('list_cpu_us_per_req_16x16', 0):.1f} | {s.get('list_no_thumbnail_qps_16x16', 0):,.0f} | "
                     f"{s.get('stream_s_1x1', 0):.3f} | "
                     f"{s.get('stream_cpu_ms_1x1', 0):,.0f} |")
    if ratios:
        lines += ["", "| ratio | GetEmployee QPS 16×16 | CPU µs/req GetEmployee |", "|---|--:|--:|"]
        for p in ("go", "cpp"):
            r = ratios.get(f"roster_over_{p}")
            if r:
                cpu = f"{r['get_cpu_us_per_req']:.2f}" if r["get_cpu_us_per_req"] is not None else "n/a"
                lines.append(f"| Roster ÷ {'grpc-go' if p == 'go' else 'C++'} | {r['get_qps']:.2f} | {cpu} |")
    lines += ["",
              f"16×16: 16 connections × 16 streams, {sc.get('get_16x16', 0):,} requests; 1×1: one connection, "
              f"one stream, {sc.get('get_1x1', 0):,} requests. CPU µs/req: the server's utime+stime ÷ requests "
              "at 16×16. StreamEmployees: the whole listing in pages of 50, one stream at a time, "
              f"{sc.get('stream_1x1', 0)} streams. RSS: VmRSS 3 s after the last run."]
    quiet = res.get("quiet") or {}
    if quiet.get("gave_up_before"):
        busy = quiet["busy_runs"]
        most = max(b["busy_cores"] for b in busy)
        builds = " and Swift builds ran" if any(b["swift_builds"] for b in busy) else ""
        lines += ["", f"**Measured on a busy machine.** Other work kept up to {most:.1f} cores busy{builds}, and it "
                  f"did not stop within {quiet['timeout_s']} s of waiting (before {quiet['gave_up_before']}). "
                  f"{len(busy)} of the {quiet.get('checks', len(busy))} server starts and h2load runs found the "
                  "machine busy. These numbers are low and noisy: measure again on a quiet machine."]
    return "\n".join(lines)


def med_range(xs, fmt):
    return f"{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}–{fmt.format(max(xs))})"


def detail(res):
    """Every scenario, with medians and (min–max) over the rounds."""
    recs = res["records"]
    names = [n for n in SERVERS if any(r["server"] == n for r in recs)]
    rounds = res["rounds"]
    lines = [f"guid {res['guid']}, {rounds} round{'s' if rounds != 1 else ''}, {where(res)}; medians (min–max)", ""]
    for scen, get, hc in (("16 conns × 16 streams", "get_16x16", "hc_16x16"),
                          ("1 conn × 1 stream", "get_1x1", "hc_1x1")):
        lines += [f"### {scen}", "",
                  "| server | GetEmployee QPS | Health QPS | Get mean latency µs | Health mean latency µs | "
                  "CPU µs/req Get | CPU µs/req Health | RSS after Get MiB | Threads |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for n in names:
            rs = [r for r in recs if r["server"] == n]
            g = [r["runs"][get] for r in rs]
            h = [r["runs"][hc] for r in rs]
            lines.append("| " + " | ".join([
                LABEL[n],
                med_range([x["qps"] for x in g], "{:,.0f}"),
                med_range([x["qps"] for x in h], "{:,.0f}"),
                med_range([x["mean_us"] for x in g], "{:.0f}"),
                med_range([x["mean_us"] for x in h], "{:.0f}"),
                med_range([x["cpu_us_per_req"] for x in g], "{:.1f}"),
                med_range([x["cpu_us_per_req"] for x in h], "{:.1f}"),
                med_range([x["mem"]["VmRSS"] / 1024 for x in g], "{:.1f}"),
                med_range([x["mem"]["Threads"] for x in g], "{:.0f}"),
            ]) + " |")
        lines.append("")
    lines += ["### Memory (MiB): idle after startup, idle 3 s after the load, peak (VmHWM)", "",
              "| server | RSS after startup | RSS after load | VmHWM | RssAnon after load | RssFile after load |",
              "|---|---|---|---|---|---|"]
    for n in names:
        rs = [r for r in recs if r["server"] == n]
        lines.append("| " + " | ".join([
            LABEL[n],
            med_range([r["mem_startup"]["VmRSS"] / 1024 for r in rs], "{:.1f}"),
            med_range([r["mem_after_load"]["VmRSS"] / 1024 for r in rs], "{:.1f}"),
            med_range([r["mem_after_load"]["VmHWM"] / 1024 for r in rs], "{:.1f}"),
            med_range([r["mem_after_load"]["RssAnon"] / 1024 for r in rs], "{:.1f}"),
            med_range([r["mem_after_load"]["RssFile"] / 1024 for r in rs], "{:.1f}"),
        ]) + " |")
    return "\n".join(lines)


# --- the run --------------------------------------------------------------------------------------

def roster_commit():
    """HEAD of the current directory's git checkout, `+changes` when tracked files differ."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+changes" if dirty else "")


def write_json(path, res):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(res, f, indent=1)
    os.replace(tmp, path)


def run(a):
    plan_name = "quick" if a.quick else "full"
    plan = PLANS[plan_name]
    rounds = a.rounds or plan["rounds"]
    servers = a.servers.split(",")
    for s in servers:
        if s not in SERVERS:
            raise BenchError(f"unknown server {s!r} (known: {', '.join(SERVERS)})")
    if a.pin:
        if (os.cpu_count() or 1) < 2:
            raise BenchError("--pin needs at least 2 CPUs")
        PIN.update(server="1", client="0")
    count, guid = middle_guid()
    files = prepare_bodies(guid)
    # A smoke run measures nothing worth waiting for a quiet machine.
    quiet = Quiet(0 if a.quick else QUIET_TIMEOUT_S)
    h2v = subprocess.run(["h2load", "--version"], capture_output=True, text=True).stdout.strip()
    env = {"uname": os.uname().release, "cpus": os.cpu_count(), "db": rel(DB), "employees": count, "h2load": h2v}
    st = os.stat(ROSTER)
    res = {"tool": "peers", "format": 2, "quick": a.quick, "plan": plan, "guid": guid, "rounds": rounds,
           "pin": dict(PIN), "env": env,
           "roster": {"binary": rel(ROSTER), "commit": roster_commit(),
                      "binary_mtime": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(st.st_mtime))},
           "started": time.strftime("%Y-%m-%d %H:%M:%S"), "records": []}
    results = os.path.join(WORK, "results")
    os.makedirs(results, exist_ok=True)
    out = os.path.join(results, time.strftime("bench-%Y%m%d-%H%M%S") + ("-quick" if a.quick else "")
                       + ("-pinned" if PIN else "") + ".json")
    with open("/proc/loadavg") as f:
        load = f.read().strip()
    log(f"bench: {count:,} employees, guid {guid}, {rounds} round(s) of {', '.join(servers)} "
        f"({plan_name}); load {load}")
    for rnd in range(1, rounds + 1):
        k = (rnd - 1) % len(servers)
        order = servers[k:] + servers[:k]
        log(f"round {rnd}: {', '.join(order)}")
        for name in order:
            res["records"].append(measure_server(name, files, rnd, plan, quiet))
            res["quiet"] = quiet.report()
            write_json(out, res)
    res["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    res["quiet"] = quiet.report()
    res["summary"], res["ratios"] = summarize(res)
    write_json(out, res)
    log(f"bench: raw results in {rel(out)}")
    if a.json:
        write_json(os.path.abspath(a.json), res)
        log(f"bench: wrote {rel(os.path.abspath(a.json))}")
    print()
    print(table(res))
    return 0


def main():
    ap = argparse.ArgumentParser(description="Roster vs a grpc-go peer vs a C++ gRPC peer, with h2load.")
    ap.add_argument("--rounds", type=int, help="rounds (default 3; 1 with --quick)")
    ap.add_argument("--quick", action="store_true", help="1 round and fewer requests: a smoke run")
    ap.add_argument("--pin", action="store_true",
                    help="server on CPU 1 only, h2load on CPU 0 only (taskset), so they do not share a core")
    ap.add_argument("--json", metavar="FILE", help="also write the results, summary and ratios to FILE")
    ap.add_argument("--servers", default=",".join(SERVERS), help="which servers, comma-separated")
    ap.add_argument("--summarize", metavar="FILE", help="print the tables of an earlier run's JSON file")
    a = ap.parse_args()
    if a.rounds is not None and a.rounds < 1:
        ap.error("--rounds must be at least 1")
    if a.summarize:
        with open(a.summarize) as f:
            res = json.load(f)
        print(table(res))
        print()
        print(detail(res))
        return 0
    stop_on_sigterm()
    try:
        return run(a)
    except KeyboardInterrupt:
        print("bench: interrupted; servers stopped", file=sys.stderr)
        return 130
    except (BenchError, RuntimeError, OSError, sqlite3.Error) as err:
        print(f"bench: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
