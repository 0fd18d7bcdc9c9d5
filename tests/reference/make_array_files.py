# Small NumPy and HDF5 array files for tests/data/test_array_file.cpp (the readers of
# runtime/data/array_file.h), written by NumPy and h5py themselves so the tests read what users'
# tools write. Values follow formulas the test recomputes: x[r, j] = (3 r + j) / 4, y[r] = r % 3.
# Run: /usr/bin/python3 tests/reference/make_array_files.py  (NumPy 1.24, h5py 3.7).
import os

import h5py
import numpy as np

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "arrays")
os.makedirs(out, exist_ok=True)
rows = 10
x = (np.arange(rows * 3, dtype=np.float32) / 4).reshape(rows, 3)
y = np.arange(rows, dtype=np.int64) % 3
ids = (np.arange(rows * 2, dtype=np.int32) * 7).reshape(rows, 2)
flag = (np.arange(rows) % 2 == 0)
z = (np.arange(rows * 2, dtype=np.float64) - 5).reshape(rows, 2)
img = (np.arange(rows * 2 * 2, dtype=np.uint8)).reshape(rows, 1, 2, 2)


def path(name):
    return os.path.join(out, name)


# .npz: stored (np.savez: read in place) and deflated (np.savez_compressed: inflated on use)
np.savez(path("xy.npz"), x=x, y=y, ids=ids, flag=flag, img=img)
np.savez_compressed(path("xy_compressed.npz"), x=x, y=y, ids=ids, flag=flag, img=img)
np.save(path("x.npy"), x.astype(np.float64))
# HDF5: datasets at the root and in a group, one big-endian (HDF5 converts it), one chunked+gzip
with h5py.File(path("xy.h5"), "w") as f:
    f.create_dataset("x", data=x)
    f.create_dataset("y", data=y)
    f.create_dataset("grp/z", data=z.astype(">f8"))
    f.create_dataset("img", data=img, chunks=(2, 1, 2, 2), compression="gzip")
# what the readers refuse
np.save(path("fortran.npy"), np.asfortranarray(x))
np.save(path("bigendian.npy"), x.astype(">f4"))
np.save(path("uint16.npy"), np.arange(4, dtype=np.uint16))
np.save(path("structured.npy"), np.zeros(3, dtype=[("a", "<f4"), ("b", "<i4")]))
with open(path("x.npy"), "rb") as f:
    whole = f.read()
with open(path("truncated.npy"), "wb") as f:
    f.write(whole[:-8])
np.savez(path("short_labels.npz"), x=x, y=y[:-1])
with h5py.File(path("strings.h5"), "w") as f:
    f.create_dataset("x", data=x)
    f.create_dataset("names", data=np.array([b"a", b"b"]))
# a regression for tests/onnx/models/mlp.onnx (x [N, 6] -> 4 outputs): tandem-train --data runs
rng = np.random.default_rng(0)
rx = rng.standard_normal((256, 6)).astype(np.float32)
ry = (np.tanh(rx @ rng.standard_normal((6, 4))) * 2).astype(np.float32)
np.savez(path("regression.npz"), x=rx, y=ry, classes=np.argmax(ry, 1))
# a dense map for tests/onnx/models/unet.onnx (x [N, 3, 8, 8] -> y [N, 2, 8, 8]): its BatchNorms' running
# statistics make a resume carry buffers as well as weights and Adam's moments
ux = rng.standard_normal((32, 3, 8, 8)).astype(np.float32)
uy = np.stack([0.5 * ux[:, 0] + ux[:, 1], np.maximum(ux[:, 2], 0)], 1).astype(np.float32)
np.savez(path("unet.npz"), x=ux, y=uy)
print("wrote", sorted(os.listdir(out)))
