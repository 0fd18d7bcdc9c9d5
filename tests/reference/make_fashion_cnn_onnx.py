#!/usr/bin/python3
"""tandem's built-in Fashion-MNIST cnn (nn::make_cnn: Conv(1,32,3,p1)-BN-ReLU-MaxPool2-Conv(32,64,3,p1)-
BN-ReLU-MaxPool2-Flatten-Linear(3136,128)-ReLU-Linear(128,10)) written in PyTorch and exported to ONNX
as docs/onnx.md recommends, for `tandem-train --model FILE.onnx` and the speed comparison of the
imported graph with the built-in model (its weights are PyTorch's initialisation, not tandem's).
Not committed (1.7 MB): run /usr/bin/python3 tests/reference/make_fashion_cnn_onnx.py OUT.onnx"""
import sys

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(
    nn.Conv2d(1, 32, 3, 1, 1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, 1, 1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
model.train()
torch.onnx.export(model, (torch.randn(2, 1, 28, 28),), sys.argv[1], opset_version=13, input_names=["x"],
                  output_names=["logits"], dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}},
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
print(sys.argv[1])
