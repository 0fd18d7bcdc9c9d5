"""safetensors written by hand for the reference scripts (no safetensors package needed): an 8-byte
little-endian header length, the JSON header (padded with spaces to 8 bytes, as the safetensors
package does), then the raw little-endian float32 data in header order."""
import json
import struct

import torch


def save_safetensors(path, tensors, metadata=None):
    header, blobs, offset = ({"__metadata__": metadata} if metadata else {}), [], 0
    for name, t in tensors:
        data = t.detach().contiguous().to(torch.float32).numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
