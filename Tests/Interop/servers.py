"""What the interop suites share about the server they drive: a free port, a tokens file,
and a stop that fails the suite when the server does not exit cleanly on SIGTERM (it is
killed then, so that no test leaves it behind)."""
import os
import shutil
import signal
import socket
import subprocess
import sys


def free_port():
    """A loopback TCP port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_tokens(roster, work, roles):
    """Makes one token per role with `roster token`; writes their lines to WORK/tokens and
    returns the tokens by role."""
    tokens, lines = {}, []
    for role in roles:
        token, line = subprocess.run([roster, "token", "--role", role], check=True,
                                     capture_output=True, text=True).stdout.splitlines()[:2]
        tokens[role] = token
        lines.append(line)
    with open(os.path.join(work, "tokens"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return tokens


def h2_post(base, path, body, headers, timeout):
    """One POST over a new HTTP/2 connection with prior knowledge, its HEADERS and whole body sent
    at once (python's `h2`), read to the end of the stream: (status, headers and trailers by
    lower-case name, body bytes). `headers`: (name, value) pairs beside the pseudo-headers.

    curl 7.88 over HTTP/2 stalls when the answer comes before it has sent its body (curl issue
    10433, fixed in 8.0): a server may answer early (RFC 9113 section 8.1), so a call that is
    refused before its body is read goes through here.
    """
    import h2.config
    import h2.connection
    import h2.events
    authority = base.split("//", 1)[1]
    host, port = authority.rsplit(":", 1)
    connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    connection.initiate_connection()
    connection.send_headers(1, [(":method", "POST"), (":path", path), (":scheme", "http"),
                                (":authority", authority), *headers])
    connection.send_data(1, body, end_stream=True)
    status, reply, data = 0, {}, b""
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(connection.data_to_send())
        ended = False
        while not ended:
            chunk = sock.recv(65536)
            if not chunk:
                raise AssertionError(f"{path}: the connection closed before the reply ended")
            for event in connection.receive_data(chunk):
                if isinstance(event, h2.events.ResponseReceived):
                    reply = {name.lower(): value for name, value in event.headers}
                    status = int(reply[":status"])
                elif isinstance(event, h2.events.TrailersReceived):
                    reply.update({name.lower(): value for name, value in event.headers})
                elif isinstance(event, h2.events.DataReceived):
                    data += event.data
                    connection.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                elif isinstance(event, h2.events.StreamEnded):
                    ended = True
                elif isinstance(event, h2.events.StreamReset) and not ended:
                    raise AssertionError(f"{path}: the stream was reset ({event.error_code!r})")
            sock.sendall(connection.data_to_send())
    return status, reply, data


def stop(server, *files):
    """SIGTERM, then 30 s for a clean exit (status 0); closes the server's stdout and `files`."""
    try:
        server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
        raise AssertionError("the server did not stop within 30 s of SIGTERM")
    finally:
        server.stdout.close()
        for f in files:
            f.close()
    if code != 0:
        raise AssertionError(f"server exited {code} on SIGTERM")


def stop_all(processes):
    """SIGTERM to each of `processes` still running, then waits up to 10 s for each and kills
    what is left (nginx's master, on TERM, takes its workers with it; on KILL they would stay)."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def verdict(problems, work):
    """A test script's exit status: 0 with no problems (its scratch directory `work` removed),
    else 1, the problems printed and `work` kept for its logs."""
    if problems:
        print("\n".join(problems), file=sys.stderr)
        print(f"logs in {work}", file=sys.stderr)
        return 1
    shutil.rmtree(work)
    return 0


def run_script(main, processes):
    """Exits with `main()`'s status, stopping `processes` on every path (a SIGTERM too)."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        sys.exit(main())
    finally:
        stop_all(processes)
