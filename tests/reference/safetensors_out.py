"""safetensors written by hand for the reference scripts (no safetensors package needed): an 8-byte
little-endian header length, the JSON header (padded with spaces to 8 bytes, as the safetensors
package does), then the raw little-endian data in header order: int64 tensors as "I64", any other
tensor converted to float32, "F32". Takes PyTorch tensors or NumPy arrays (the onnxruntime scripts
need no PyTorch)."""
import json
import struct

import numpy as np


def save_safetensors(path, tensors, metadata=None):
    header, blobs, offset = ({"__metadata__": metadata} if metadata else {}), [], 0
    for name, t in tensors:
        if isinstance(t, np.ndarray):
            a = t
        else:  # a PyTorch tensor: int64 as it is, anything else (bf16 included) through float32
            t = t.detach().cpu()
            a = (t if str(t.dtype) == "torch.int64" else t.float()).contiguous().numpy()
        if a.dtype == np.int64:
            dtype, data = "I64", np.ascontiguousarray(a).astype("<i8").tobytes()
        else:
            dtype, data = "F32", np.ascontiguousarray(a).astype("<f4").tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
