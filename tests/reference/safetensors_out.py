"""safetensors written by hand for the reference scripts (no safetensors package needed): an 8-byte
little-endian header length, the JSON header (padded with spaces to 8 bytes, as the safetensors
package does), then the raw little-endian data in header order: int64 tensors as "I64", any other
tensor converted to float32, "F32"."""
import json
import struct

import torch


def save_safetensors(path, tensors, metadata=None):
    header, blobs, offset = ({"__metadata__": metadata} if metadata else {}), [], 0
    for name, t in tensors:
        if t.dtype == torch.int64:
            dtype, data = "I64", t.detach().contiguous().numpy().astype("<i8").tobytes()
        else:
            dtype, data = "F32", t.detach().contiguous().to(torch.float32).numpy().astype("<f4").tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
