"""Writes small ONNX models exported by PyTorch and their reference values, for the ONNX importer's tests,
into tests/onnx/models/ (README.md there lists the files):
  K.onnx                 K = mlp, cnn, resnet, two_io, encoder, mobilenet, decoder, unet (opset 13), unsupported
                         (opset 13, has a CumSum), strided_slice (a Slice with step 2)
  K_opset17.onnx         K = mlp, encoder, mobilenet, decoder, unet: the same model, same initializers, opset 17
                         (K.ref.safetensors applies to it)
  K.ref.safetensors      references for K (not for unsupported), float32 ("F32") except encoder's int64 input
                         ("I64"); [j] = output j, [i] = input i:
    input.<i>              the inputs (standard normal, fixed seed; batch 3; encoder: token ids in [0, 11))
    train.output.<j>       outputs in train() mode (BatchNorm normalizes with the batch's statistics)
    eval.output.<j>        outputs in eval() mode (BatchNorm uses the running stats held by the .onnx)
    probe.<j>              a fixed random tensor shaped as output j; the loss is L = sum_j sum(out_j * probe_j)
                           (standard normal; unet's / 8, PROBE_SCALE)
    grad.<init>            dL/dparam in train mode, under the parameter's ONNX initializer name
    grad.input.<i>         dL/dinput i (float inputs only: none for encoder's ids)
    step10.<init>          each parameter after 10 steps of SGD(lr=0.01, momentum=0.9) on L, same inputs each
                           step, train mode; step10.<bn>.running_mean/.running_var: BatchNorm's running stats
                           after those 10 forward passes (PyTorch: momentum 0.1, the UNBIASED batch variance)
    ort.output.<j>         onnxruntime's outputs of K.onnx for input.<i> (when onnxruntime imports)
  corrupt.onnx           the first 100 bytes of mlp.onnx then 300 random bytes (onnx.load fails on it; written with mlp)
  unet_cubic.onnx        unet.onnx with its Resize's mode set to "cubic", which the importer refuses (written with unet)
Every .onnx passes onnx.checker.check_model(full_check=True). The references start from the state the
.onnx files hold (its initializers), computed on fresh copies of that model.
Run from the repository root (onnxruntime is optional; without it the ort.* entries are left out):
    /opt/ref-venv/bin/python3 tests/reference/make_onnx_models.py      (or /usr/bin/python3: Debian's
    PyTorch 1.13.0, onnx 1.12; the venv adds onnxruntime on top of the system packages)
    ... make_onnx_models.py --only unet[,mlp...]   regenerates only the models named (and leaves the others' files)

The export, recommended for a graph meant for training (export() below):
    model.train()
    torch.onnx.export(model, args, path, opset_version=13, input_names=[...], output_names=[...],
                      dynamic_axes={each input and output: {0: "batch"}},
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
What it gives (PyTorch 1.13, inspected with onnx.load; the script prints it again):
- Initializers are named as the state_dict: "0.weight", "layer1.0.conv1.weight", "bn1.running_mean",
  "layer2.0.downsample.1.running_var", "fc.bias" ...; every parameter and BN running_mean/running_var is
  one, num_batches_tracked is not (nothing reads it). Graph inputs/outputs carry the names given ("x", "y",
  "a", "b", "y1", "y2") with dim 0 "batch"; inner values are named "/<module path>/<Op>_output_<n>".
  Opset import: the default domain only (13; 17 for K_opset17). ir_version 7 (8 for opset 17).
- The export traces ONE forward pass in train mode, which updates each BN's running stats with the example
  inputs (momentum 0.1, num_batches_tracked += 1) BEFORE the initializers are taken, and leaves the
  exported module so updated. This script therefore exports a copy and takes that copy's post-export state
  as the models' initial state (the BN running stats were first set to random values, var in [0.5, 2], and
  BN weight/bias moved off 1/0, so eval differs from train and a swapped tensor shows).
- BatchNormalization stays a node (inputs X, scale=<bn>.weight, B=<bn>.bias, mean=<bn>.running_mean,
  var=<bn>.running_var; epsilon 1e-5; momentum 0.9, i.e. ONNX's running = 0.9 running + 0.1 batch, the
  complement of PyTorch's 0.1). Opset 13: NO training_mode attribute (opset <= 13 has none) and 5 outputs
  (Y, running_mean, running_var, saved_mean, saved_var): the extra outputs are what marks training mode
  there. Opset 15 and 17: training_mode=1 and 3 outputs (Y, running_mean, running_var). In both, the
  extra outputs dangle: they are not graph outputs and no node reads them, so the importer has to update
  the running stats itself. ONNX's spec updates the running var with the population (biased) variance;
  PyTorch uses the unbiased one: the step10.*.running_var references follow PyTorch.
- No Dropout or Identity nodes appear in these models. (A Dropout in a TRAINING export becomes
  Dropout(x, ratio, training_mode) with two Constant inputs and 2 outputs, output and mask.)
- TrainingMode.PRESERVE with model.train() gives the same graph as TRAINING (and the same stat update).
  PRESERVE with model.eval() keeps the names and the BN nodes, in inference form (1 output; opset 15+:
  training_mode=0), and updates no stats: an alternative for an importer that decides train/eval itself.
  TrainingMode.EVAL (even with do_constant_folding=False, model in train() or eval()) folds each BN into
  the Conv before it: the BN nodes vanish and the folded conv weights are renamed "onnx::Conv_30" etc., so
  it is no use for training.
Op types, in the files' opset 13 (the importer's list):
  mlp          Gemm Relu
  cnn          Conv BatchNormalization Relu MaxPool Constant Pad AveragePool Flatten Gemm
  resnet       Conv BatchNormalization Relu Add GlobalAveragePool Flatten Gemm
  two_io       Concat Gemm Relu Constant ReduceSum Add
  unsupported  Gemm Constant CumSum
  encoder      Gather Add ReduceMean Sub Constant Pow Sqrt Div Mul Shape Transpose MatMul Split Unsqueeze Concat
               Reshape Softmax Erf Gemm
  decoder      Constant Shape Gather Cast Range Unsqueeze Concat Reshape ConstantOfShape Mul Equal Where Expand Add
               ReduceMean Sub Pow Sqrt Div Transpose MatMul Split Slice Softmax Tanh (torch's expand(b, t) is
               ConstantOfShape/Mul/Equal/Where on its shape, then Expand; masked_fill(bias[:, :, :T, :T] == 0, -inf) is
               two Slices of the initializer `bias`, Equal with 0, Cast to bool, Where(cond, -inf, scores))
  mobilenet    Conv BatchNormalization HardSigmoid Mul Constant Clip GlobalAveragePool Relu Flatten Gemm
               (mobilenet_opset17: Conv BatchNormalization HardSwish Constant Clip GlobalAveragePool Relu
               HardSigmoid Mul Flatten Gemm)
  unet         Conv BatchNormalization Relu MaxPool ConvTranspose Concat Constant Resize (the same at opset 17)
  Linear is Gemm(alpha 1, beta 1, transB 1) with the weight [out, in]. Conv carries dilations, group,
  kernel_shape, pads and strides explicitly; resnet's convs have no bias (2 inputs). MaxPool/AveragePool:
  kernel_shape, strides, pads 0, ceil_mode 0. AvgPool2d(2) exports as Pad(x, Constant int64 zeros[8],
  mode "constant") then AveragePool: a zero pad, a no-op. AdaptiveAvgPool2d(1) is GlobalAveragePool;
  torch.flatten(x, 1) and nn.Flatten are Flatten(axis 1). ReduceSum (opset 13) takes its axes as a second
  input, a Constant int64 [1], and keepdims=1; CumSum takes its axis as a Constant int64 scalar.
The encoder (input "ids" int64 [batch, 5], output "logits" [batch, 3]; initializers pos, tok.weight, ln1.*,
qkv.*, proj.*, ln2.*, fc1.*, fc2.*, ln_f.*, head.*, each .weight/.bias):
  nn.Embedding is Gather(tok.weight, ids) (no axis attribute: 0), then Add(., pos) broadcasting [5, 8].
  nn.Linear on a 3-d input is Transpose(<w>, perm [1, 0]), MatMul(x, .), Add(<b>, .) (the bias first); the
  last, on the 2-d mean, is Gemm(transB 1). split(8, -1) is Split(x, Constant int64 [8, 8, 8]), axis -1.
  view/reshape take their shape from Concat(axis 0) of Unsqueeze(., Constant int64 [0]) of each dim: batch and
  tokens are Gather(Shape(ln1's output), Constant int64 scalar 0 / 1, axis 0), the others Constant int64
  scalars (2, 4; 8): three Reshape to [B, T, 2, 4], one to [B, T, 8]; opset 17's Reshape has allowzero 0.
  No Cast, Expand, Where, Equal or ConstantOfShape. transpose(1, 2) is Transpose perm [0, 2, 1, 3];
  k.transpose(-2, -1) after it is folded into one Transpose perm [0, 2, 3, 1]; the scores are
  Div(MatMul(q, k^T), Constant 2.0), Softmax axis -1, MatMul with v.
  nn.GELU() is x * (1 + Erf(x / Constant 1.4142135)) * Constant 0.5 (Div, Erf, Add, Mul, Mul).
  nn.LayerNorm at opset 13: ReduceMean(x, axes [-1], keepdims default 1), Sub, Pow(., Constant float32 scalar
  2.0), ReduceMean(axes [-1]), Add(., Constant 1e-5), Sqrt, Div, Mul(., <ln>.weight), Add(., <ln>.bias) (the
  biased variance); at opset 17 one LayerNormalization(x, <ln>.weight, <ln>.bias), axis -1, epsilon 1e-5,
  one output. mean(1) is ReduceMean(axes [1], keepdims 0). encoder_opset17 ops: Gather Add
  LayerNormalization Shape Constant Transpose MatMul Split Unsqueeze Concat Reshape Div Softmax Erf Mul
  ReduceMean Gemm. LayerNorm weight/bias start off 1/0 (as BN's), pos ~ 0.5 N(0, 1); the ids leave tokens
  0, 4 and 10 unused (zero rows in grad.tok.weight) and repeat 6 four times (Gather's gradient accumulates).
The mobilenet (TinyMobileNet: input "x" [batch, 3, 8, 8], output "y" [batch, 10]; initializers stem.0.weight,
stem.1.*, dw.0.weight, dw.1.*, se.fc1.*, se.fc2.*, pw.0.weight, pw.1.*, gconv.0.weight/.bias, gconv.1.*,
fc.*; each BN's weight, bias, running_mean, running_var):
  Convs: stem group 1, strides [2, 2], pads [1, 1, 1, 1]; dw (depthwise) group 8, weight [8, 1, 3, 3]; se.fc1/
  se.fc2 1x1 with bias; pw 1x1 no bias; gconv group 4, weight [16, 4, 3, 3], with bias; all dilations [1, 1].
  nn.Hardswish at opset 13 is Mul(x, HardSigmoid(x)) (x read twice, same shape); at opset 17 one HardSwish
  node. nn.Hardsigmoid is HardSigmoid with alpha 1/6 (float 0.16666667) and NO beta attribute (ONNX's
  default 0.5), at both opsets. nn.ReLU6 is Clip(x, min, max) with min and max as inputs, each a Constant
  float32 scalar (0.0, 6.0), not initializers, at both opsets. AdaptiveAvgPool2d(1) is GlobalAveragePool
  (no ReduceMean); the squeeze-excitation's product is Mul(x [B, 8, 4, 4], scale [B, 8, 1, 1]) (broadcast).
  With these inputs ReLU6 never reaches 6 and the SE's HardSigmoid input stays in (-3, 3); the stem's
  Hardswish sees values on both sides of +-3.
The unet (TinyUNet: input "x" [batch, 3, 8, 8], output "y" [batch, 2, 8, 8]; initializers enc1.*, enc2.*, mid.*,
dec2.*, dec1.* (each .0.weight, the conv without bias, and .1.* its BN), up2.weight [8, 8, 3, 3] / up2.bias, head.*):
  nn.ConvTranspose2d is ConvTranspose(x, up2.weight, up2.bias) with dilations [1, 1], group 1, kernel_shape [3, 3],
  output_padding [1, 1], pads [1, 1, 1, 1], strides [2, 2]; the weight is [in, out, kh, kw].
  nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False) is Resize(x, "", scales) with scales =
  Concat(axis 0) of Constant float32 [1, 1] and Constant float32 [2, 2] (not an initializer; roi omitted ""),
  mode "linear", coordinate_transformation_mode "half_pixel", nearest_mode "floor", cubic_coeff_a -0.75. (Opset
  11 writes roi as an empty Constant.) mode "nearest" exports coordinate_transformation_mode "asymmetric" with
  nearest_mode "floor"; align_corners=True "align_corners"; F.interpolate(size=...) gives sizes (input 3) as
  Concat(Slice(Shape(x), [0], [2]), Cast(Constant int64 [h, w])) instead of scales. torch.cat is Concat(axis 1).
onnxruntime runs the TRAINING export's BatchNormalization with the batch's statistics (it honours the
extra outputs / training_mode=1): its outputs agree with train.output to ~1e-7 and differ from
eval.output by 0.34 (cnn), 0.45 (resnet) and 0.27 (mobilenet); for models without BN the two are the same.
"""
import argparse
import copy
import math
import os

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn as nn
from safetensors_out import save_safetensors

try:
    import onnxruntime as ort
except ImportError:  # Debian's /usr/bin/python3 has no onnxruntime: the ort.* references are left out.
    ort = None

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "onnx", "models")
STEPS, LR, MOMENTUM = 10, 0.01, 0.9


# ---------------------------------------------------------------------------------------------- models

class BasicBlock(nn.Module):
    """torchvision's BasicBlock (torchvision is not installed here): two 3x3 convs without bias, each with
    a BatchNorm, the residual added before the last ReLU; `downsample` (1x1 conv + BN) when the shape changes."""

    def __init__(self, cin, cout, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class TinyResNet(nn.Module):
    """torchvision's ResNet layout (conv1/bn1 stem, layerN.M blocks, fc) at toy size, so the state_dict
    names are the ones a real torchvision ResNet export carries."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = nn.Sequential(BasicBlock(8, 8))
        self.layer2 = nn.Sequential(BasicBlock(8, 16, stride=2, downsample=nn.Sequential(
            nn.Conv2d(8, 16, 1, stride=2, bias=False), nn.BatchNorm2d(16))))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class TwoIO(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(7, 4)
        self.fc2 = nn.Linear(4, 1)

    def forward(self, a, b):
        y1 = self.fc1(torch.cat([a, b], 1)).relu()
        y2 = self.fc2(y1) + b.sum(1, keepdim=True)
        return y1, y2


class Unsupported(nn.Module):
    """A Linear then a cumulative sum: CumSum is not on the importer's first list of ops."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return torch.cumsum(self.fc(x), dim=1)


class StridedSlice(nn.Module):
    """A Linear then every other column, x[:, ::2]: a Slice with step 2, which the importer refuses."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)[:, ::2]


class Encoder(nn.Module):
    """A tiny transformer encoder over token ids [batch, 5] (vocabulary 11, width 8, 2 heads of 4): token
    embedding + a learned positional parameter `pos`, one pre-LayerNorm block (attention written by hand,
    one Linear for q, k, v; an erf-GELU MLP), a final LayerNorm, the mean over the tokens, a Linear to 3."""

    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(11, 8)
        self.pos = nn.Parameter(0.5 * torch.randn(5, 8))
        self.ln1 = nn.LayerNorm(8)
        self.qkv = nn.Linear(8, 24)
        self.proj = nn.Linear(8, 8)
        self.ln2 = nn.LayerNorm(8)
        self.fc1 = nn.Linear(8, 16)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(16, 8)
        self.ln_f = nn.LayerNorm(8)
        self.head = nn.Linear(8, 3)

    def attn(self, x):
        B, T, _ = x.shape
        q, k, v = self.qkv(x).split(8, dim=-1)
        q, k, v = (t.view(B, T, 2, 4).transpose(1, 2) for t in (q, k, v))
        a = (q @ k.transpose(-2, -1) / 2.0).softmax(-1)
        return self.proj((a @ v).transpose(1, 2).reshape(B, T, 8))

    def forward(self, ids):
        x = self.tok(ids) + self.pos
        x = x + self.attn(self.ln1(x))
        x = x + self.fc2(self.act(self.fc1(self.ln2(x))))
        return self.head(self.ln_f(x).mean(1))


class SqueezeExcitation(nn.Module):
    """torchvision's SqueezeExcitation as MobileNetV3 uses it: the spatial mean, fc1 (1x1 conv), ReLU, fc2
    (1x1 conv), Hardsigmoid, multiplied into the input channel by channel."""

    def __init__(self, c, squeeze):
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(c, squeeze, 1)
        self.activation = nn.ReLU()
        self.fc2 = nn.Conv2d(squeeze, c, 1)
        self.scale_activation = nn.Hardsigmoid()

    def forward(self, x):
        return x * self.scale_activation(self.fc2(self.activation(self.fc1(self.avgpool(x)))))


class TinyMobileNet(nn.Module):
    """A MobileNetV3-style net at toy size, input [batch, 3, 8, 8]: a stride-2 stem (conv, BN, Hardswish); a
    depthwise-separable block (depthwise 3x3 conv, BN, ReLU6, squeeze-excitation, pointwise 1x1 conv to 16,
    BN); a grouped 3x3 conv (4 groups), BN, Hardswish; the spatial mean, Flatten, Linear(16, 10)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(8),
                                  nn.Hardswish())
        self.dw = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False), nn.BatchNorm2d(8), nn.ReLU6())
        self.se = SqueezeExcitation(8, 4)
        self.pw = nn.Sequential(nn.Conv2d(8, 16, 1, bias=False), nn.BatchNorm2d(16))
        self.gconv = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, groups=4), nn.BatchNorm2d(16), nn.Hardswish())
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.pw(self.se(self.dw(self.stem(x))))
        return self.fc(self.flatten(self.avgpool(self.gconv(x))))


class Decoder(nn.Module):
    """A tiny GPT-style decoder over token ids [batch, tokens] (vocabulary 11, up to 6 tokens, width 8, 2 heads
    of 4), written as nanoGPT writes it: token and position embeddings (positions arange(T) expanded to the
    batch), one pre-LayerNorm block with causal self-attention masked by a float `bias` buffer
    (tril(ones), `masked_fill(bias[:, :, :T, :T] == 0, -inf)`), a per-head learned [2, 4, 4] map applied to q
    (a MatMul whose leading dims broadcast), a tanh-GELU MLP, a final LayerNorm and an untied head to logits
    per token. Exported with a dynamic token axis: the tests run 5 tokens, so the mask is sliced."""

    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(11, 8)
        self.wpe = nn.Embedding(6, 8)
        self.ln1 = nn.LayerNorm(8)
        self.attn = nn.Linear(8, 24)
        self.qmap = nn.Parameter(torch.eye(4).repeat(2, 1, 1) + 0.3 * torch.randn(2, 4, 4))
        self.proj = nn.Linear(8, 8)
        self.ln2 = nn.LayerNorm(8)
        self.fc = nn.Linear(8, 32)
        self.fc2 = nn.Linear(32, 8)
        self.ln_f = nn.LayerNorm(8)
        self.head = nn.Linear(8, 11, bias=False)
        self.register_buffer("bias", torch.tril(torch.ones(6, 6)).view(1, 1, 6, 6))

    def attention(self, x):
        B, T, C = x.size()
        q, k, v = self.attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, 2, 4).transpose(1, 2) for t in (q, k, v))
        q = q @ self.qmap
        a = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(4))
        a = a.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf")).softmax(-1)
        return self.proj((a @ v).transpose(1, 2).contiguous().view(B, T, C))

    def forward(self, ids):
        b, t = ids.size()
        pos = torch.arange(0, t, dtype=torch.long, device=ids.device).unsqueeze(0).expand(b, t)
        x = self.wte(ids) + self.wpe(pos)
        x = x + self.attention(self.ln1(x))
        x = x + self.fc2(nn.functional.gelu(self.fc(self.ln2(x)), approximate="tanh"))
        return self.head(self.ln_f(x))


class TinyUNet(nn.Module):
    """A U-Net at toy size, input [batch, 3, 8, 8], output [batch, 2, 8, 8]: two encoder levels (3x3 conv, BN,
    ReLU) with MaxPool between them, a bottleneck at 2x2; up by a ConvTranspose2d (3x3, stride 2, padding 1,
    output_padding 1) to 4x4, concatenated with the second level's skip; up by nn.Upsample (bilinear,
    align_corners False) to 8x8, concatenated with the first level's skip; a 1x1 conv head."""

    def __init__(self):
        super().__init__()

        def block(cin, cout):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())

        self.enc1 = block(3, 4)
        self.pool = nn.MaxPool2d(2)
        self.enc2 = block(4, 8)
        self.mid = block(8, 8)
        self.up2 = nn.ConvTranspose2d(8, 8, 3, stride=2, padding=1, output_padding=1)
        self.dec2 = block(16, 8)
        self.up1 = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.dec1 = block(12, 4)
        self.head = nn.Conv2d(4, 2, 1)

    def forward(self, x):
        e1 = self.enc1(x)                                    # [B, 4, 8, 8]
        e2 = self.enc2(self.pool(e1))                        # [B, 8, 4, 4]
        m = self.mid(self.pool(e2))                          # [B, 8, 2, 2]
        d2 = self.dec2(torch.cat([self.up2(m), e2], 1))      # [B, 8, 4, 4]
        d1 = self.dec1(torch.cat([self.up1(d2), e1], 1))     # [B, 4, 8, 8]
        return self.head(d1)


def mlp():
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))


def cnn():
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(4, 8, 3, padding=1, stride=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AvgPool2d(2),
                         nn.Flatten(), nn.Linear(8 * 2 * 2, 5))


# name: (constructor, seed, inputs, output names, whether references are written); an input is (name, shape),
# standard normal float32, or (name, shape, n): int64 ids uniform in [0, n)
MODELS = {
    "mlp": (mlp, 101, [("x", (3, 6))], ["y"], True),
    "cnn": (cnn, 102, [("x", (3, 1, 8, 8))], ["y"], True),
    "resnet": (TinyResNet, 103, [("x", (3, 3, 8, 8))], ["y"], True),
    "two_io": (TwoIO, 104, [("a", (3, 5)), ("b", (3, 2))], ["y1", "y2"], True),
    "unsupported": (Unsupported, 105, [("x", (3, 4))], ["y"], False),
    "encoder": (Encoder, 106, [("ids", (3, 5), 11)], ["logits"], True),
    "mobilenet": (TinyMobileNet, 107, [("x", (3, 3, 8, 8))], ["y"], True),
    "decoder": (Decoder, 108, [("ids", (3, 5), 11)], ["logits"], True),
    "strided_slice": (StridedSlice, 109, [("x", (3, 4))], ["y"], False),
    "unet": (TinyUNet, 108, [("x", (3, 3, 8, 8))], ["y"], True),
}
# Axes besides dim 0 (the batch) exported as dynamic: {model: {value name: {axis: name}}}.
DYNAMIC = {"decoder": {"ids": {1: "tokens"}, "logits": {1: "tokens"}}}
# Probes scaled down where standard normal ones make the 10 SGD steps compare nothing. unet (a [3, 2, 8, 8]
# map): its gradients are ~25 and the steps diverge (running variances of 1e7). decoder: its 165 logits drive
# the LayerNorms and the masked softmax so hard that PyTorch's own float32 and float64 runs end 2.6e-3 apart
# after 10 steps (3e-7 at 0.1): the trajectory's sensitivity, not tandem's error.
PROBE_SCALE = {"unet": 0.125, "decoder": 0.1}
# Models also exported at opset 17 as K_opset17.onnx, from the same pre-export state (K.ref.safetensors applies).
OPSET17 = ("mlp", "encoder", "mobilenet", "decoder", "unet")


def make_model(ctor, seed):
    """The model with its initial weights. BatchNorm's state is moved away from its defaults (running stats
    0/1, weight 1, bias 0) so that eval mode differs from train mode and a swapped or ignored tensor shows,
    and LayerNorm's weight/bias off 1/0 likewise; this happens before the export, so the initializers carry
    these values."""
    torch.manual_seed(seed)
    m = ctor()
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.copy_(0.5 * torch.randn_like(mod.running_mean))
                mod.running_var.copy_(torch.empty_like(mod.running_var).uniform_(0.5, 2.0))
                mod.weight.copy_(1.0 + 0.2 * torch.randn_like(mod.weight))
                mod.bias.copy_(0.2 * torch.randn_like(mod.bias))
            if isinstance(mod, nn.LayerNorm):
                mod.weight.copy_(1.0 + 0.2 * torch.randn_like(mod.weight))
                mod.bias.copy_(0.2 * torch.randn_like(mod.bias))
    return m.train()


# ---------------------------------------------------------------------------------------------- export

def export(m, inputs, in_names, out_names, path, opset, dynamic=None):
    """The recommended export (see the docstring): train() mode + TrainingMode.TRAINING keeps BatchNorm as a
    node and the state_dict names; do_constant_folding=False keeps the initializers as they are. The
    export traces one forward pass in train mode, which updates BatchNorm's running stats (momentum 0.1)
    with the example inputs before the initializers are taken, so a copy is exported and returned: its
    state after the export is exactly what the file's initializers hold, and is the references' start."""
    m = copy.deepcopy(m).train()
    torch.onnx.export(m, tuple(inputs), path, opset_version=opset, input_names=in_names, output_names=out_names,
                      dynamic_axes={n: {0: "batch", **(dynamic or {}).get(n, {})} for n in in_names + out_names},
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    check_initializers(model, m)
    return model, m


def describe(model):
    """Op types, initializer names and the BatchNormalization nodes of an exported graph."""
    g = model.graph
    ops = []
    for n in g.node:
        if n.op_type not in ops:
            ops.append(n.op_type)
    bns = [(list(n.input), len(n.output), {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute})
           for n in g.node if n.op_type == "BatchNormalization"]
    return {"ops": ops, "initializers": [i.name for i in g.initializer], "bn": bns,
            "inputs": [i.name for i in g.input], "outputs": [o.name for o in g.output]}


def check_initializers(model, m):
    """Every initializer is a state_dict entry under its name, with the pre-export value, and every
    parameter and BN running stat is an initializer (num_batches_tracked is not: nothing reads it)."""
    sd = m.state_dict()
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    for name, a in inits.items():
        assert name in sd, f"initializer {name} is not a state_dict name"
        assert np.array_equal(a, sd[name].numpy()), f"initializer {name} differs from the model's"
    want = [n for n in sd if not n.endswith("num_batches_tracked")]
    assert sorted(want) == sorted(inits), (sorted(want), sorted(inits))


# ---------------------------------------------------------------------------------------------- references

def outputs_of(m, inputs):
    y = m(*inputs)
    return list(y) if isinstance(y, tuple) else [y]


def references(m0, inputs, seed, probe_scale=1.0):
    """The reference tensors for model m0 (left untouched) and its inputs, as (name, tensor) pairs; the probes
    standard normal times probe_scale."""
    refs = [(f"input.{i}", x) for i, x in enumerate(inputs)]
    with torch.no_grad():
        train_out = outputs_of(copy.deepcopy(m0).train(), inputs)
        eval_out = outputs_of(copy.deepcopy(m0).eval(), inputs)
    refs += [(f"train.output.{j}", y) for j, y in enumerate(train_out)]
    refs += [(f"eval.output.{j}", y) for j, y in enumerate(eval_out)]
    torch.manual_seed(seed + 2000)
    probes = [probe_scale * torch.randn(y.shape) for y in train_out]
    refs += [(f"probe.{j}", p) for j, p in enumerate(probes)]

    def loss(m, xs):
        return sum((y * p).sum() for y, p in zip(outputs_of(m, xs), probes))

    m = copy.deepcopy(m0).train()
    xs = [x.clone().requires_grad_(True) if x.is_floating_point() else x for x in inputs]
    fx = [(i, x) for i, x in enumerate(xs) if x.is_floating_point()]  # no grad.input.<i> for an int64 input
    params = list(m.named_parameters())
    grads = torch.autograd.grad(loss(m, xs), [p for _, p in params] + [x for _, x in fx])
    refs += [(f"grad.{n}", g) for (n, _), g in zip(params, grads)]
    refs += [(f"grad.input.{i}", g) for (i, _), g in zip(fx, grads[len(params):])]

    m = copy.deepcopy(m0).train()
    opt = torch.optim.SGD(m.parameters(), lr=LR, momentum=MOMENTUM)
    for _ in range(STEPS):
        opt.zero_grad()
        loss(m, inputs).backward()
        opt.step()
    refs += [(f"step{STEPS}.{n}", p) for n, p in m.named_parameters()]
    refs += [(f"step{STEPS}.{n}", b) for n, b in m.named_buffers() if n.endswith(("running_mean", "running_var"))]
    return refs, train_out, eval_out


def write_corrupt():
    """The importer's error test: a valid start (the protobuf header and the first fields) cut off by garbage."""
    with open(os.path.join(OUT, "mlp.onnx"), "rb") as f:
        head = f.read(100)
    rng = np.random.default_rng(7)
    with open(os.path.join(OUT, "corrupt.onnx"), "wb") as f:
        f.write(head + rng.integers(0, 256, 300, dtype=np.uint8).tobytes())
    try:
        onnx.load(os.path.join(OUT, "corrupt.onnx"))
    except Exception:  # protobuf's DecodeError: corrupt, as meant
        pass
    else:
        raise AssertionError("corrupt.onnx parses")


def run_ort(path, in_names, inputs):
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return [torch.from_numpy(y) for y in sess.run(None, {n: x.numpy() for n, x in zip(in_names, inputs)})]


def max_diff(a, b):
    return max(float((x - y).abs().max()) for x, y in zip(a, b))




# ---------------------------------------------------------------------------------------------- main

def write_unet_cubic():
    """unet_cubic.onnx: unet.onnx with its Resize's mode set to cubic, which the importer refuses."""
    model = onnx.load(os.path.join(OUT, "unet.onnx"))
    for n in model.graph.node:
        if n.op_type == "Resize":
            for a in n.attribute:
                if a.name == "mode":
                    a.s = b"cubic"
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, os.path.join(OUT, "unet_cubic.onnx"))


def parse_args():
    p = argparse.ArgumentParser(description="Writes the ONNX importer's test models into tests/onnx/models/.")
    p.add_argument("--only", metavar="NAME[,NAME...]",
                   help=f"regenerate only these models (of {', '.join(MODELS)}); corrupt.onnx comes with mlp")
    args = p.parse_args()
    names = list(MODELS) if args.only is None else args.only.split(",")
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        p.error(f"unknown model {', '.join(unknown)} (the models: {', '.join(MODELS)})")
    return names


def main():
    names = parse_args()
    os.makedirs(OUT, exist_ok=True)
    summary = []
    for name in names:
        ctor, seed, ins, out_names, with_refs = MODELS[name]
        m0 = make_model(ctor, seed)
        torch.manual_seed(seed + 1000)
        inputs = [torch.randn(sp[1]) if len(sp) == 2 else torch.randint(0, sp[2], sp[1]) for sp in ins]
        in_names = [sp[0] for sp in ins]
        path = os.path.join(OUT, name + ".onnx")
        m_init = m0
        model, m0 = export(m0, inputs, in_names, out_names, path, 13, DYNAMIC.get(name))
        d = describe(model)
        print(f"== {name}: ops {d['ops']}\n   inputs {d['inputs']} outputs {d['outputs']}\n"
              f"   initializers {d['initializers']}")
        for bn_in, n_out, attrs in d["bn"]:
            print(f"   BatchNormalization inputs {bn_in} outputs {n_out} attributes {attrs}")
        row = [name, " ".join(d["ops"]), "-", "-"]
        if name in OPSET17:
            # From the same pre-export state: its one train-mode pass updates the BN running stats exactly as
            # the opset-13 export did, so the opset-17 file holds the same initializers (checked).
            m17, _ = export(m_init, inputs, in_names, out_names, os.path.join(OUT, name + "_opset17.onnx"), 17,
                            DYNAMIC.get(name))
            check_initializers(m17, m0)
            print(f"   {name}_opset17 ops {describe(m17)['ops']}")
        if with_refs:
            refs, train_out, eval_out = references(m0, inputs, seed, PROBE_SCALE.get(name, 1.0))
            meta = {"generator": "tests/reference/make_onnx_models.py", "torch": torch.__version__,
                    "onnx": onnx.__version__, "model": name + ".onnx"}
            if ort is not None:
                ort_out = run_ort(path, in_names, inputs)
                refs += [(f"ort.output.{j}", y) for j, y in enumerate(ort_out)]
                meta["onnxruntime"] = ort.__version__
                row[2:] = [f"{max_diff(ort_out, train_out):.3g}", f"{max_diff(ort_out, eval_out):.3g}"]
                if name in OPSET17:
                    o17 = run_ort(os.path.join(OUT, name + "_opset17.onnx"), in_names, inputs)
                    print(f"   {name}_opset17: max |ort - torch train| {max_diff(o17, train_out):.3g}")
            save_safetensors(os.path.join(OUT, name + ".ref.safetensors"), refs, meta)
        summary.append(row)
        if name == "unet":
            write_unet_cubic()
        if name == "mlp":
            write_corrupt()

    print(f"\n{'model':<12} {'max|ort-train|':>15} {'max|ort-eval|':>14}  op types")
    for name, ops, dt, de in summary:
        print(f"{name:<12} {dt:>15} {de:>14}  {ops}")
    for fn in sorted(os.listdir(OUT)):
        print(f"{os.path.getsize(os.path.join(OUT, fn)):>8}  {fn}")


if __name__ == "__main__":
    main()
