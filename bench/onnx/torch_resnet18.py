#!/usr/bin/python3
"""ResNet-18 (torchvision's architecture: BasicBlocks [2, 2, 2, 2], widths 64-512, a 7x7 stride-2 stem
and max pool) with 10 classes, for the comparison of tandem training its ONNX export with PyTorch 1.13
training the model itself, on synthetic CIFAR-size batches:
  /usr/bin/python3 bench/onnx/torch_resnet18.py export OUT.onnx      (the recommended training export)
  /usr/bin/python3 bench/onnx/torch_resnet18.py train --batch 32 --threads 1 [--steps 20] [--warmup 3]
`train` prints one JSON line like tandem-bench-onnx: random inputs [batch, 3, 32, 32], labels i % 10,
cross entropy, SGD lr 0.01 momentum 0.9."""
import argparse
import json
import time

import torch
from torch import nn


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return self.relu(y + (x if self.downsample is None else self.downsample(x)))


class ResNet18(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        widths, cin, layers = [64, 128, 256, 512], 64, []
        for i, w in enumerate(widths):
            layers.append(nn.Sequential(BasicBlock(cin, w, 1 if i == 0 else 2), BasicBlock(w, w, 1)))
            cin = w
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["export", "train"])
    p.add_argument("out", nargs="?")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    a = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(a.threads)
    model = ResNet18().train()
    if a.what == "export":
        torch.onnx.export(model, (torch.randn(2, 3, 32, 32),), a.out, opset_version=13, input_names=["x"],
                          output_names=["logits"], dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}},
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
        return
    x = torch.randn(a.batch, 3, 32, 32)
    y = torch.arange(a.batch) % 10
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(a.warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        last = step()
    secs = time.perf_counter() - t0
    print(json.dumps({"bench": "torch_train", "model": "resnet18", "batch": a.batch, "threads": a.threads,
                      "steps": a.steps, "steps_per_s": round(a.steps / secs, 4), "loss": round(last, 4)}))


if __name__ == "__main__":
    main()
