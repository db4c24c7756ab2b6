"""Python stubs for Roster's protos, made by grpcio-tools into a scratch folder (never by the
Swift build), shared by the interop, replica and abuse suites.

    import rosterstubs
    rosterstubs.generate(WORK, ["types.proto", "directory.proto"])
    from roster.v1 import directory_pb2
"""
import os
import sys

import grpc_tools
from grpc_tools import protoc

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def generate(work, names=("types.proto", "directory.proto", "pictures.proto", "analytics.proto")):
    """Writes the stubs of `names` (in Protos/roster/v1), and of options.proto, into
    WORK/stubs and puts that folder first on the import path; returns it."""
    # Every service's file imports options.proto (the methods' policies).
    names = ["options.proto"] + [name for name in names if name != "options.proto"]
    stubs = os.path.join(work, "stubs")
    os.makedirs(stubs, exist_ok=True)
    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    protos = [os.path.join("roster/v1", name) for name in names]
    if protoc.main(["protoc", "-I", os.path.join(ROOT, "Protos"), "-I", include,
                    "--python_out=" + stubs, "--grpc_python_out=" + stubs] + protos) != 0:
        raise SystemExit("grpc_tools.protoc failed")
    sys.path.insert(0, stubs)
    return stubs
