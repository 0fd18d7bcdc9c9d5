// A Sequential of nn/layers as an ONNX graph: one or a few nodes per layer, in order; the input's
// shape read off the first layer that fixes it (Linear: [batch, in]; Conv2d: [batch, C, height,
// width]; Embedding: [batch, sequence] ids), the output's shape followed through the layers.
#include <fmt/format.h>

#include "nn/layers.h"
#include "nn/onnx/export_parts.h"
#include "runtime/error.h"

namespace tandem::nn::onnx::detail {

namespace {

// A layer and its state_dict prefix ("3." for child 3, "1.0." inside a nested Sequential).
struct Leaf {
  std::string prefix;
  const Module* m;
};

void collect(const Module& m, const std::string& prefix, std::vector<Leaf>& out) {
  if (dynamic_cast<const Sequential*>(&m) != nullptr) {
    for (const auto& [name, child] : m.children()) collect(*child, prefix + name + ".", out);
    return;
  }
  out.push_back({prefix, &m});
}

std::string where(const Leaf& l) {
  return l.prefix.empty() ? l.m->type_name() : fmt::format("{} (layer {})", l.m->type_name(),
                                                             l.prefix.substr(0, l.prefix.size() - 1));
}

// The value flowing through the layers: its name, dtype and shape (unknown dims: size -1, no name).
struct Flow {
  std::string value;
  DType dtype = DType::f32;
  std::vector<Dim> dims;
  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
};

Dim unknown() { return Dim{}; }

// A window's output size ((n + 2p - k) / s + 1), unknown where n is.
Dim window(const Dim& n, int64_t k, int64_t s, int64_t p) {
  return n.size < 0 ? unknown() : Dim::of((n.size + 2 * p - k) / s + 1);
}

// The graph's input, from the first layer that says what it takes.
Flow declare_input(const std::vector<Leaf>& leaves, GraphBuilder& b) {
  Flow f;
  f.value = "x";
  const Dim batch = Dim::named("batch");
  for (const Leaf& l : leaves) {
    const Module* m = l.m;
    if (auto* lin = dynamic_cast<const Linear*>(m)) {
      f.dims = {batch, Dim::of(lin->in_features())};
    } else if (auto* conv = dynamic_cast<const Conv2d*>(m)) {
      f.dims = {batch, Dim::of(conv->in_channels()), Dim::named("height"), Dim::named("width")};
    } else if (auto* bn2 = dynamic_cast<const BatchNorm2d*>(m)) {
      f.dims = {batch, Dim::of(bn2->num_features()), Dim::named("height"), Dim::named("width")};
    } else if (auto* bn1 = dynamic_cast<const BatchNorm1d*>(m)) {
      f.dims = {batch, Dim::of(bn1->num_features())};
    } else if (auto* ln = dynamic_cast<const LayerNorm*>(m)) {
      f.dims = {batch};
      for (int64_t d : ln->normalized_shape()) f.dims.push_back(Dim::of(d));
    } else if (dynamic_cast<const Embedding*>(m) != nullptr) {
      f.dtype = DType::i64;
      f.dims = {batch, Dim::named("sequence")};
    } else if (dynamic_cast<const Identity*>(m) || dynamic_cast<const ReLU*>(m) || dynamic_cast<const GELU*>(m) ||
               dynamic_cast<const Dropout*>(m)) {
      continue;  // takes any shape: the next layer says
    } else {
      TANDEM_FAIL(NotSupported, "{}: ONNX export cannot tell the input's shape from a first layer {}; begin the "
                  "model with a Linear, Conv2d, BatchNorm, LayerNorm or Embedding", b.source(), where(l));
    }
    b.input(f.value, f.dtype, f.dims);
    return f;
  }
  TANDEM_FAIL(NotSupported, "{}: ONNX export needs a layer with weights to tell the input's shape", b.source());
}

// The layer's parameter or buffer `name`, added to the graph as an initializer under its
// state_dict name (the layer's prefix and `name`).
std::string weight(GraphBuilder& b, const Leaf& l, const std::string& name) {
  for (const NamedTensors& tensors : {l.m->named_parameters(), l.m->named_buffers()})
    for (const auto& [n, t] : tensors)
      if (n == name) return b.initializer(l.prefix + name, t);
  TANDEM_FAIL(Internal, "{}: {} has no tensor '{}'", b.source(), where(l), name);
}

void max_pool(GraphBuilder& b, Flow& f, int64_t k, int64_t s, int64_t p) {
  if (s == 0) s = k;  // PyTorch's default stride: the kernel
  f.value = b.op("MaxPool", {f.value}, {Attr::integers("kernel_shape", {k, k}), Attr::integers("strides", {s, s}),
                                        Attr::integers("pads", {p, p, p, p})});
  f.dims[2] = window(f.dims[2], k, s, p);
  f.dims[3] = window(f.dims[3], k, s, p);
}

void batch_norm(GraphBuilder& b, Flow& f, const Leaf& l, const BatchNormBase& bn) {
  const int64_t c = bn.num_features();
  const std::string scale = bn.affine() ? weight(b, l, "weight") : b.constant(Tensor::ones({c}));
  const std::string shift = bn.affine() ? weight(b, l, "bias") : b.constant(Tensor::zeros({c}));
  const std::string mean = weight(b, l, "running_mean"), var = weight(b, l, "running_var");
  // ONNX's momentum weighs the running value, PyTorch's (and tandem's) the batch's.
  f.value = b.op("BatchNormalization", {f.value, scale, shift, mean, var},
                 {Attr::real("epsilon", bn.eps()), Attr::real("momentum", 1.0 - bn.momentum())});
  // A fused epilogue (Sequential::fuse_batchnorm_epilogues) is the ReLU and MaxPool2d it replaced.
  const ops::BatchNormEpilogue& e = bn.epilogue();
  if (e.relu) f.value = b.op("Relu", {f.value});
  if (e.max_pool) {
    TANDEM_CHECK_KIND(NotSupported, e.pool_kernel[0] == e.pool_kernel[1] && e.pool_stride[0] == e.pool_stride[1] &&
                      e.pool_padding[0] == e.pool_padding[1], "{}: {}: a non-square pooling epilogue",
                      b.source(), where(l));
    max_pool(b, f, e.pool_kernel[0], e.pool_stride[0], e.pool_padding[0]);
  }
}

void flatten(GraphBuilder& b, Flow& f, const Leaf& l, const Flatten& fl) {
  const int64_t rank = f.rank();
  const int64_t start = fl.start_dim() < 0 ? fl.start_dim() + rank : fl.start_dim();
  const int64_t end = fl.end_dim() < 0 ? fl.end_dim() + rank : fl.end_dim();
  TANDEM_CHECK_KIND(NotSupported, start >= 1 && end == rank - 1, "{}: {}: only a Flatten from a dim after the "
                    "batch to the last is exported (start_dim {}, end_dim {} of rank {})", b.source(), where(l),
                    fl.start_dim(), fl.end_dim(), rank);
  Dim joined = Dim::of(1);
  for (int64_t d = start; d < rank; ++d)
    joined = joined.size < 0 || f.dims[d].size < 0 ? unknown() : Dim::of(joined.size * f.dims[d].size);
  if (start == 1) {
    f.value = b.op("Flatten", {f.value}, {Attr::integer("axis", 1)});
  } else {  // Flatten's output is a matrix: keep the leading dims by a Reshape that copies them (0)
    std::vector<int64_t> spec(static_cast<size_t>(start), 0);
    spec.push_back(-1);
    f.value = b.op("Reshape", {f.value, b.constant_ints(spec)});
  }
  f.dims.resize(static_cast<size_t>(start));
  f.dims.push_back(joined);
}

// One layer's nodes.
void layer(GraphBuilder& b, Flow& f, const Leaf& l) {
  const Module* m = l.m;
  b.set_scope(l.prefix.empty() ? "" : l.prefix.substr(0, l.prefix.size() - 1));
  auto need_rank = [&](int64_t want) {
    TANDEM_CHECK_KIND(NotSupported, f.rank() == want, "{}: {} takes rank {} here, where the value has rank {}",
                      b.source(), where(l), want, f.rank());
  };
  if (dynamic_cast<const Identity*>(m)) return;
  if (auto* lin = dynamic_cast<const Linear*>(m)) {
    const bool bias = m->has_param("bias");
    f.value = linear(b, f.value, f.rank(), weight(b, l, "weight"), bias ? weight(b, l, "bias") : "");
    f.dims.back() = Dim::of(lin->out_features());
  } else if (auto* conv = dynamic_cast<const Conv2d*>(m)) {
    need_rank(4);
    const int64_t k = conv->kernel_size(), s = conv->stride(), p = conv->padding();
    std::vector<std::string> in{f.value, weight(b, l, "weight")};
    if (m->has_param("bias")) in.push_back(weight(b, l, "bias"));
    f.value = b.op("Conv", in, {Attr::integers("kernel_shape", {k, k}), Attr::integers("strides", {s, s}),
                                Attr::integers("pads", {p, p, p, p})});
    f.dims = {f.dims[0], Dim::of(conv->out_channels()), window(f.dims[2], k, s, p), window(f.dims[3], k, s, p)};
  } else if (auto* bn = dynamic_cast<const BatchNormBase*>(m)) {
    if (bn->epilogue().max_pool) need_rank(4);
    batch_norm(b, f, l, *bn);
  } else if (dynamic_cast<const ReLU*>(m)) {
    f.value = b.op("Relu", {f.value});
  } else if (auto* g = dynamic_cast<const GELU*>(m)) {
    f.value = gelu(b, f.value, g->tanh_approximation());
  } else if (auto* d = dynamic_cast<const Dropout*>(m)) {
    // Kept as a node: other runtimes skip it in inference, tandem's importer follows train()/eval().
    f.value = b.op("Dropout", {f.value, b.constant_scalar(static_cast<float>(d->p()))});
  } else if (auto* mp = dynamic_cast<const MaxPool2d*>(m)) {
    need_rank(4);
    max_pool(b, f, mp->kernel_size(), mp->stride(), mp->padding());
  } else if (auto* ap = dynamic_cast<const AvgPool2d*>(m)) {
    need_rank(4);
    const int64_t k = ap->kernel_size(), s = ap->stride() == 0 ? k : ap->stride(), p = ap->padding();
    // tandem's average counts the zero padding, as PyTorch's default does.
    f.value = b.op("AveragePool", {f.value},
                   {Attr::integers("kernel_shape", {k, k}), Attr::integers("strides", {s, s}),
                    Attr::integers("pads", {p, p, p, p}), Attr::integer("count_include_pad", 1)});
    f.dims[2] = window(f.dims[2], k, s, p);
    f.dims[3] = window(f.dims[3], k, s, p);
  } else if (auto* fl = dynamic_cast<const Flatten*>(m)) {
    flatten(b, f, l, *fl);
  } else if (auto* ln = dynamic_cast<const LayerNorm*>(m)) {
    const int64_t n = static_cast<int64_t>(ln->normalized_shape().size());
    const Tensor ones = Tensor::ones(ln->normalized_shape()), zeros = Tensor::zeros(ln->normalized_shape());
    const bool affine = ln->elementwise_affine();
    f.value = layer_norm(b, f.value, affine ? weight(b, l, "weight") : b.constant(ones),
                         affine ? weight(b, l, "bias") : b.constant(zeros), n, ln->eps());
  } else if (auto* emb = dynamic_cast<const Embedding*>(m)) {
    TANDEM_CHECK_KIND(NotSupported, f.dtype == DType::i64, "{}: {} after a layer that computes floats", b.source(),
                      where(l));
    f.value = b.op("Gather", {weight(b, l, "weight"), f.value});
    f.dtype = DType::f32;
    f.dims.push_back(Dim::of(emb->embedding_dim()));
  } else {
    TANDEM_FAIL(NotSupported, "{}: ONNX export does not write a {}", b.source(), where(l));
  }
}

}  // namespace

void export_sequential(const Sequential& model, GraphBuilder& b) {
  std::vector<Leaf> leaves;
  collect(model, "", leaves);
  Flow f = declare_input(leaves, b);
  for (const Leaf& l : leaves) layer(b, f, l);
  TANDEM_CHECK_KIND(NotSupported, f.dtype == DType::f32, "{}: the model computes no floats (only an Embedding's "
                    "ids pass through)", b.source());
  b.set_scope("");
  b.op_into("y", "Identity", {f.value});  // the graph's output under a plain name
  b.output("y", DType::f32, f.dims);
}

}  // namespace tandem::nn::onnx::detail
