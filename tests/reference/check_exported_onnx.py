"""onnxruntime on the ONNX files tandem writes: its own models exported (nn/onnx/onnx_export.h: the
mlp, the cnn, a sequential stack, a GPT at two sequence lengths) and an imported model trained and
written back (OnnxModel::save_onnx). Prints max |tandem - onnxruntime| per model as JSON; with
--golden, writes onnxruntime's outputs for tests/onnx's OnnxExport.OnnxruntimeAgreesWithTheNativeModels,
so that the suite checks onnxruntime's agreement without Python.

    TANDEM_EXPORT_DIR=/tmp/exported build/tests/onnx/test_onnx_export \\
        --gtest_filter=OnnxExport.WriteFilesForTheReferenceScript
    /opt/ref-venv/bin/python tests/reference/check_exported_onnx.py /tmp/exported \\
        [--golden tests/onnx/models/exported.ref.safetensors]

The test writes NAME.onnx and NAME.io.safetensors (the input, tandem's eval-mode output, and the
graph's fingerprint in the metadata). The golden file holds NAME.input and NAME.onnxruntime (float32;
a GPT's ids int64) and NAME.fingerprint in its metadata: the C++ test refuses it once the exporter
writes another graph. Needs onnxruntime and numpy only (no PyTorch)."""
import argparse
import glob
import json
import os
import struct
import sys

import numpy as np
import onnxruntime as ort
from safetensors_out import save_safetensors

DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32}


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    body = data[8 + n:]
    out = {}
    for name, h in header.items():
        begin, end = h["data_offsets"]
        out[name] = np.frombuffer(body[begin:end], dtype=np.dtype(DTYPES[h["dtype"]]).newbyteorder("<")).reshape(
            h["shape"])
    return out, meta


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dir", help="where the test wrote NAME.onnx and NAME.io.safetensors")
    p.add_argument("--golden", help="write onnxruntime's outputs here (tests/onnx/models/exported.ref.safetensors)")
    args = p.parse_args()
    files = sorted(glob.glob(os.path.join(args.dir, "*.onnx")))
    if not files:
        sys.exit(f"no .onnx files in {args.dir}; run the test with TANDEM_EXPORT_DIR first")
    diffs, golden, meta = {}, [], {}
    for path in files:
        name = os.path.basename(path)[:-len(".onnx")]
        io, io_meta = load_safetensors(os.path.join(args.dir, name + ".io.safetensors"))
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        (feed,) = session.get_inputs()
        x = io["input"]
        y = session.run(None, {feed.name: x})[0]
        diffs[name] = float(np.max(np.abs(y.astype(np.float64) - io["tandem"].astype(np.float64))))
        golden += [(name + ".input", x), (name + ".onnxruntime", y)]
        meta[name + ".fingerprint"] = io_meta["fingerprint"]
    print(json.dumps({"onnxruntime": ort.__version__, "max_abs_diff": diffs}, indent=1))
    if args.golden:
        save_safetensors(args.golden, golden, meta)
        print(f"wrote {args.golden}", file=sys.stderr)


if __name__ == "__main__":
    main()
