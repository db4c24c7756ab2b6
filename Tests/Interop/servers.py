"""What the interop suites share about the server they drive: a free port, a tokens file,
and a stop that fails the suite when the server does not exit cleanly on SIGTERM (it is
killed then, so that no test leaves it behind)."""
import os
import signal
import socket
import subprocess


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
