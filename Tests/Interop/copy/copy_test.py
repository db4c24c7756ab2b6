#!/usr/bin/env python3
"""roster copy, SQLite to PostgreSQL and back, at 25,000 employees with pictures and sales.

A source database is made with `roster seed` and `roster import`. `roster copy` takes it into
an empty PostgreSQL schema and is killed (SIGKILL) twice on the way, once while it copies
employees and once while it copies sales; a copy into the half-filled schema without --resume
is refused, and --resume finishes it. A second copy brings the schema back into a new SQLite
file, killed once in its bulk load of employees and resumed. Each copy checks itself (--verify, on by default); this test then compares the first
and last SQLite files with Python's own sqlite3 module, never through Roster: every
employee's fields, every thumbnail's bytes, every picture's metadata, every sale, and every
counter and rollup table; and `roster check` hashes the last file's pictures and recounts its
counters.

Usage: scripts/postgres run -- python3 Tests/Interop/copy/copy_test.py ROSTER_BINARY
ROSTER_COPY_EMPLOYEES sets the size (default 25000: 50 pages of employees and about 110,000
sales, each copy killed mid-phase as at 100,000, in a quarter of the time; the copy's speed
and memory at 1M are scripts/bench-copy's).
"""
import hashlib
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

ROSTER = os.path.abspath(sys.argv[1])
URL = os.environ["ROSTER_TEST_POSTGRES_URL"]
EMPLOYEES = int(os.environ.get("ROSTER_COPY_EMPLOYEES", "25000"))
WORK = tempfile.mkdtemp(prefix="roster-copy-")
SCHEMA = "copy_test"
HANG = 900

# What must be equal, as queries over either SQLite file; row ids, update times and the change
# log are each database's own.
QUERIES = {
    "employees": """SELECT guid, name, name_folded, department, email, phone, address, about, active,
        start_date, vacation_days, picture_etag, sales_count, sales_total_cents FROM employees ORDER BY guid""",
    "thumbnails": """SELECT e.guid, t.width, t.height, t.data FROM employee_thumbnails t
        JOIN employees e ON e.id = t.employee_id ORDER BY e.guid""",
    "pictures": "SELECT etag, size, content_type, width, height, data FROM pictures ORDER BY etag",
    "sales": """SELECT e.guid, s.date, s.amount_cents FROM sales s JOIN employees e ON e.id = s.employee_id
        ORDER BY e.guid, s.date, s.amount_cents""",
    "department counters": "SELECT * FROM department_stats ORDER BY department",
    "daily sales per employee": """SELECT e.guid, d.day, d.count, d.total_cents FROM sales_daily d
        JOIN employees e ON e.id = d.employee_id ORDER BY e.guid, d.day""",
    "monthly sales": "SELECT * FROM sales_monthly ORDER BY month",
    "monthly sales per department": "SELECT * FROM sales_monthly_department ORDER BY department, month",
    "daily sales per department": "SELECT * FROM sales_daily_department ORDER BY day, department",
    "sales per amount bucket": "SELECT * FROM sales_amount_buckets ORDER BY period, department, bucket",
}


def run(args, **kwargs):
    return subprocess.run([ROSTER] + args, cwd=WORK, capture_output=True, text=True, timeout=HANG, **kwargs)


def digest(path, query):
    """The number of rows and a hash of them, read a row at a time; and the first row."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        sha, count, first = hashlib.sha256(), 0, None
        for row in connection.execute(query):
            first = first or row
            sha.update(repr(row).encode())
            count += 1
        return count, sha.hexdigest(), first
    finally:
        connection.close()


def target_employees():
    """How many employees the PostgreSQL target holds, read with psql, never through Roster."""
    counted = subprocess.run(["psql", URL, "-Atc", f"SELECT count(*) FROM {SCHEMA}.employees"],
                             capture_output=True, text=True, timeout=60)
    return int(counted.stdout.strip()) if counted.returncode == 0 else 0


def killed_copy(args, marker, delay, until=None):
    """Starts a copy, kills it `delay` seconds after it prints `marker` (and, with `until`, once
    `until()` holds: what the kill must leave behind, whatever the machine's speed); returns its
    output. A copy that ends first is fine (the resume then has less to do)."""
    process = subprocess.Popen([ROSTER] + args, cwd=WORK, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, start_new_session=True)
    lines = []
    killer = None
    stop = threading.Event()

    def kill_when_ready():
        while until is not None and not until() and not stop.wait(0.1):
            pass
        if not stop.wait(delay):
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    try:
        for line in process.stdout:
            lines.append(line)
            if marker in line and killer is None:
                killer = threading.Thread(target=kill_when_ready, daemon=True)
                killer.start()
        process.wait(timeout=HANG)
    finally:
        stop.set()
        if killer:
            killer.join()
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return process.returncode, "".join(lines)


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def main():
    started = time.monotonic()
    try:
        seeded = run(["seed", "--employees", str(EMPLOYEES), "--out", "seed.json", "--sales-per-employee", "5"])
        check(seeded.returncode == 0, f"seed failed: {seeded.stderr}")
        imported = run(["import", "seed.json", "--db", "source.sqlite"])
        check(imported.returncode == 0, f"import failed: {imported.stdout}{imported.stderr}")
        print(f"source: {EMPLOYEES} employees, {imported.stdout.strip().splitlines()[-1]}", flush=True)

        postgres = URL
        to_postgres = ["copy", "--from", "sqlite:source.sqlite", "--to", postgres, "--postgres-schema", SCHEMA]

        # Refusals that change nothing: a source that does not exist, the same database twice.
        missing = run(["copy", "--from", "sqlite:nothing.sqlite", "--to", postgres, "--postgres-schema", SCHEMA])
        check(missing.returncode != 0 and "no such database" in missing.stderr, f"missing source: {missing}")
        check(not os.path.exists(os.path.join(WORK, "nothing.sqlite")), "a missing source was created")
        same = run(["copy", "--from", "sqlite:source.sqlite", "--to", "sqlite:source.sqlite"])
        check(same.returncode != 0 and "same database" in same.stderr, f"same database: {same}")

        # Killed while it copies employees, and again while it copies sales.
        code, output = killed_copy(to_postgres, "employees: skipping", 0.5, until=lambda: target_employees() > 0)
        check(code == -signal.SIGKILL, f"the first copy ended before it was killed ({code}): {output}")
        print(f"first copy killed: {output.strip().splitlines()[-1]}", flush=True)
        refused = run(to_postgres)
        check(refused.returncode != 0 and "--resume" in refused.stderr,
              f"a copy into a non-empty target without --resume: {refused.returncode} {refused.stdout}{refused.stderr}")
        code, output = killed_copy(to_postgres + ["--resume"], "sales: skipping", 2.0)
        check(code == -signal.SIGKILL, f"the second copy ended before it was killed ({code}): {output}")
        print(f"second copy killed: {output.strip().splitlines()[-1]}", flush=True)
        resumed = run(to_postgres + ["--resume"])
        check(resumed.returncode == 0, f"resumed copy failed: {resumed.stdout}{resumed.stderr}")
        check("verified" in resumed.stdout and "equal" in resumed.stdout, f"no verification: {resumed.stdout}")
        print(resumed.stdout.strip(), flush=True)

        # Back into a new SQLite file, killed once in its bulk load of employees.
        to_sqlite = ["copy", "--from", postgres, "--postgres-schema", SCHEMA, "--to", "sqlite:back.sqlite"]
        code, output = killed_copy(to_sqlite, "employees: skipping", 1.0)
        check(code == -signal.SIGKILL, f"the copy back ended before it was killed ({code}): {output}")
        print(f"copy back killed: {output.strip().splitlines()[-1]}", flush=True)
        back = run(to_sqlite + ["--resume"])
        check(back.returncode == 0, f"copy back failed: {back.stdout}{back.stderr}")
        print(back.stdout.strip(), flush=True)

        source, copied = os.path.join(WORK, "source.sqlite"), os.path.join(WORK, "back.sqlite")
        for name, query in QUERIES.items():
            a, b = digest(source, query), digest(copied, query)
            check(a[0] > 0 or name == "pictures", f"{name}: the source has none")
            check(a[:2] == b[:2], f"{name} differ: {a[0]} rows in the source, {b[0]} after the round trip")
            print(f"{name}: {a[0]} rows, equal", flush=True)
        checked = run(["check", "--db", "back.sqlite"])
        check(checked.returncode == 0, f"roster check failed on the copy: {checked.stdout}{checked.stderr}")
        print(checked.stdout.strip().splitlines()[-1], flush=True)
        print(f"copy test passed in {time.monotonic() - started:.0f} s")
    finally:
        shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()
