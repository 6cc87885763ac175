"""The floor: what any Python program reading a net with Caffe's schema pays, and no more.

    python bench/floor.py NET.prototxt

A fresh interpreter imports protobuf, loads BVLC Caffe's schema (the FileDescriptorSet protoaudit
ships, compiled from caffe.proto) and parses the file with protobuf's public text parser,
text_format.Parse. bench.py times it in a new process beside protoaudit's.
"""
import os
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format

SCHEMA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "protoaudit", "read", "schemas", "bvlc.desc")


def main(path):
    with open(SCHEMA, "rb") as f:
        files = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for proto in files.file:
        pool.Add(proto)
    net = message_factory.GetMessageClass(pool.FindMessageTypeByName("caffe.NetParameter"))()
    with open(path) as f:
        text_format.Parse(f.read(), net)
    return net


if __name__ == "__main__":
    main(sys.argv[1])
