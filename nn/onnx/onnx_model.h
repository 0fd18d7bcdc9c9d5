// An imported ONNX graph as a tandem Module: its float initializers are the parameters, named as the
// exporter's state_dict names them ("layer1.0.conv1.weight"), BatchNormalization's running statistics
// are buffers, and forward runs the nodes in order on tandem's ops, so autograd, DDP, DataParallel,
// checkpoints and the optimizers treat it as any other model. BatchNormalization and Dropout follow
// train()/eval(), whatever mode the export was made in.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "nn/module.h"
#include "runtime/ops/norm.h"
#include "runtime/dtype.h"

namespace tandem::nn::onnx {

struct Graph;
struct OpCall;  // onnx_ops.h (internal): one node's run
struct Value;

struct ImportOptions {
  // Initializers that are not trained: a name, or a prefix ending in "." ("layer1." freezes a block).
  // They are buffers: they move, load and save with the model but are in no optimizer.
  std::vector<std::string> frozen;
};

class OnnxModel : public Module {
 public:
  // Reads, checks and prepares `path`: ValueError naming the file, the node, the op and the opset
  // for an op, attribute or opset tandem does not run (the whole graph is checked here, not at the
  // first forward); IOError for a file that cannot be read.
  explicit OnnxModel(const std::string& path, const ImportOptions& options = {});
  // The same from a file's bytes (`source` names it in messages).
  static std::shared_ptr<OnnxModel> from_bytes(const std::string& bytes, const std::string& source,
                                               const ImportOptions& options = {});

  // The graph's inputs in order -> its outputs in order.
  std::vector<Tensor> forward_many(const std::vector<Tensor>& inputs) override;
  // One input, one output.
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "OnnxModel"; }
  // The imported file with this model's weights and running statistics in its initializers (the
  // graph as it was): what tandem trained, for onnxruntime or any other runtime. Written atomically.
  void save_onnx(const std::string& path) const;
  std::shared_ptr<Module> clone() const override;

  size_t num_inputs() const;
  size_t num_outputs() const;
  // A graph input or output as the file declares it: dims -1 where it gives a name or nothing (dim 0,
  // the batch, takes any size whatever it says).
  struct TensorSpec {
    std::string name;
    DType dtype = DType::f32;
    std::vector<int64_t> dims;
  };
  std::vector<TensorSpec> inputs() const;
  std::vector<TensorSpec> outputs() const;

 private:
  OnnxModel() = default;
  OnnxModel(Graph graph, const ImportOptions& options);
  // Handles onto the registered parameters and buffers by initializer name (the same tensors: a
  // move to another device is seen), and the constants that are neither.
  void index_state();

  // How many nodes read each value (a graph output counts as two readers: it is never fused away).
  using ReaderCounts = std::unordered_map<std::string, int>;
  // BatchNormalization -> Relu [-> MaxPool] chains run as one batch_norm with its epilogue (the
  // built-in cnn's fusion).
  void fuse_batchnorm_epilogues(const ReaderCounts& readers);
  // x * 0.5 * (1 + erf(x / sqrt 2)) (nn.GELU()'s export: Div, Erf, Add, Mul, Mul) runs as one exact
  // gelu on x; an Erf anywhere else is refused here, at load.
  void fuse_gelu(const ReaderCounts& readers);

  std::shared_ptr<const Graph> graph_;
  // What forward runs for each node, decided at load.
  struct NodePlan {
    // The op at the graph's opset (onnx_ops.h's OpFn); null: folded into the node before it.
    std::vector<Value> (*fn)(const OpCall&) = nullptr;
    std::vector<std::string> inputs;   // what it reads (a fused GELU: x alone)
    std::vector<std::string> outputs;  // what it writes (a fused BatchNormalization's Y: its chain's end)
    bool has_epilogue = false;
    ops::BatchNormEpilogue epilogue;
  };
  std::vector<NodePlan> plan_;  // one per node
  std::unordered_map<std::string, Tensor> state_;
};

}  // namespace tandem::nn::onnx
