"""Compile the Caffe schemas into the package as serialized FileDescriptorSets.

Run after editing a .proto here (needs the dev extra, which brings grpcio-tools' protoc):
    python proto/build.py
Each schema lands in protoaudit/read/schemas/<name>.desc and is loaded into its own descriptor
pool at run time, so forks that reuse `package caffe` and Caffe's field numbers never clash,
and no protoc is needed to install or run protoaudit.
"""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "protoaudit", "read", "schemas")

# schema name -> .proto file, relative to this folder: BVLC's, and each fork's forks/NAME.proto
SCHEMAS = {"bvlc": "caffe.proto"} | {
    name[: -len(".proto")]: os.path.join("forks", name)
    for name in sorted(os.listdir(os.path.join(HERE, "forks"))) if name.endswith(".proto")
}


def compile_schema(proto_path):
    """Return the FileDescriptorSet bytes protoc makes of one .proto file."""
    from grpc_tools import protoc

    folder, name = os.path.split(os.path.join(HERE, proto_path))
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "schema.desc")
        status = protoc.main(["protoc", f"-I{folder}", f"--descriptor_set_out={out}", name])
        if status != 0:
            raise SystemExit(f"protoc failed on {proto_path}")
        with open(out, "rb") as f:
            return f.read()


def main():
    for schema, proto_path in SCHEMAS.items():
        with open(os.path.join(OUT, f"{schema}.desc"), "wb") as f:
            f.write(compile_schema(proto_path))
        print(f"{proto_path} -> protoaudit/read/schemas/{schema}.desc")


if __name__ == "__main__":
    sys.exit(main())
