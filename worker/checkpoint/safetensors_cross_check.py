"""Reads the file safetensors_cross_check_writer wrote, with nothing but the standard library
(struct + json), following the safetensors specification independently of our C++ reader.

usage: safetensors_cross_check.py FILE
Exits non-zero naming every difference from what the writer was told to write.
"""
import json
import struct
import sys

# The writer's model: layers {4, 3, 2} with buffers, SetPatternValues (test_model.h).
EXPECTED_SHAPES = {
    "fc1.weight": [3, 4],  # nn.Linear(4, 3).weight: [out, in]
    "fc1.bias": [3],
    "fc2.weight": [2, 3],
    "fc2.bias": [2],
    "fc1.input_mean": [4],
    "fc1.input_mask": [4],
}
PARAMETERS = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]  # registration order
EXPECTED_METADATA = {"format": "pt", "ringleader_step": "42", "spec_fingerprint": "cafef00d"}


def expected_values(name, count):
    if name in PARAMETERS:
        i = PARAMETERS.index(name)
        return [(i + 1) + k / 4 for k in range(count)]  # exact in float32
    if name == "fc1.input_mean":
        return [-(k + 1) / 2 for k in range(count)]
    return [0.0 if k == 1 else 1.0 for k in range(count)]  # fc1.input_mask


def main(path):
    errors = []
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    if n % 8 != 0:
        errors.append(f"header length {n} is not a multiple of 8")
    header_bytes = data[8 : 8 + n]
    if not header_bytes.startswith(b"{"):
        errors.append("header does not start with '{'")
    header = json.loads(header_bytes.decode("utf-8"))
    body = data[8 + n :]

    metadata = header.pop("__metadata__", None)
    if metadata != EXPECTED_METADATA:
        errors.append(f"metadata {metadata} != {EXPECTED_METADATA}")
    if sorted(header) != sorted(EXPECTED_SHAPES):
        errors.append(f"tensor names {sorted(header)} != {sorted(EXPECTED_SHAPES)}")

    end = 0
    for name, entry in sorted(header.items(), key=lambda item: item[1]["data_offsets"]):
        begin, stop = entry["data_offsets"]
        if begin != end:
            errors.append(f"{name}: data starts at {begin}, previous tensor ended at {end}")
        end = stop
        if entry["dtype"] != "F32":
            errors.append(f"{name}: dtype {entry['dtype']}, expected F32")
            continue
        shape = entry["shape"]
        if shape != EXPECTED_SHAPES.get(name):
            errors.append(f"{name}: shape {shape}, expected {EXPECTED_SHAPES.get(name)}")
        count = 1
        for d in shape:
            count *= d
        if stop - begin != 4 * count:
            errors.append(f"{name}: {stop - begin} bytes for {count} float32 values")
            continue
        values = list(struct.unpack(f"<{count}f", body[begin:stop]))
        want = expected_values(name, count)
        if values != want:
            errors.append(f"{name}: values {values}, expected {want}")
    if end != len(body):
        errors.append(f"the tensors cover {end} bytes of data, the file holds {len(body)}")

    for e in errors:
        print(f"FAIL: {e}", file=sys.stderr)
    if not errors:
        print(f"ok: {path}: {len(header)} tensors, names, shapes, dtype and values as written")
    return 1 if errors else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
