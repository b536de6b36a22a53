#!/usr/bin/python3
"""Compares the parameters of ringside checkpoints.

usage: compare_checkpoints.py TOLERANCE REFERENCE OTHER...
Prints, for each OTHER, max |a - b| / max |b| over all parameters (b: REFERENCE) and
exits 1 if any exceeds TOLERANCE, or if the steps or sizes differ.
File layout (common/checkpoint.h, version 3): "RINGCKPT" | uint32 version | uint32 header
bytes | header | float32 params | float32 optimizer state | uint32 crc32 (not checked
here: the ringside reader does). The header's num_params is field 2 (varint) of the
CheckpointHeader proto.
"""
import struct
import sys

import numpy as np


def read_varint(buf, pos):
    value, shift = 0, 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, pos


def header_fields(header):
    """Top-level varint fields of a serialized proto (enough for num_params, step)."""
    fields, pos = {}, 0
    while pos < len(header):
        key, pos = read_varint(header, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            fields[number], pos = read_varint(header, pos)
        elif wire == 2:
            length, pos = read_varint(header, pos)
            pos += length
        elif wire == 5:
            pos += 4
        elif wire == 1:
            pos += 8
        else:
            raise ValueError("unexpected wire type %d" % wire)
    return fields


def load(path):
    data = open(path, "rb").read()
    if data[:8] != b"RINGCKPT":
        raise SystemExit("%s: not a ringside checkpoint" % path)
    _, header_len = struct.unpack_from("<II", data, 8)
    header = data[16:16 + header_len]
    fields = header_fields(header)
    n = fields.get(2, 0)
    params = np.frombuffer(data, dtype="<f4", count=n, offset=16 + header_len)
    return params, fields.get(4, 0)


def main():
    tol = float(sys.argv[1])
    ref, ref_step = load(sys.argv[2])
    ok = True
    for path in sys.argv[3:]:
        other, step = load(path)
        if other.shape != ref.shape or step != ref_step:
            print("%s: %d params at step %d vs %d at step %d" %
                  (path, other.size, step, ref.size, ref_step))
            ok = False
            continue
        rel = float(np.max(np.abs(other.astype(np.float64) - ref)) / np.max(np.abs(ref)))
        short = lambda p: "/".join(p.split("/")[-2:])
        print("%s vs %s: max relative difference %.3g (step %d)" % (short(path), short(sys.argv[2]), rel, step))
        ok &= rel <= tol
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
