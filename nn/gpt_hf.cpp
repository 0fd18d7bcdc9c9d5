// Hugging Face GPT-2 weights into nn::GPT.
#include "nn/gpt_hf.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

#include "runtime/autograd.h"
#include "runtime/error.h"
#include "runtime/ops.h"
#include "runtime/serialization/safetensors.h"

namespace tandem::nn {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The file's tensors under tandem's names (prefix stripped, buffers and the tied head dropped).
std::map<std::string, Tensor> hf_tensors(const std::string& path) {
  serialization::SafetensorsContents c = serialization::load_safetensors(path);
  std::map<std::string, Tensor> out;
  for (auto& [raw, t] : c.tensors) {
    std::string name = raw.rfind("transformer.", 0) == 0 ? raw.substr(12) : raw;
    if (name == "lm_head.weight" || ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias")) continue;
    out[name] = t;
  }
  return out;
}

bool is_conv1d(const std::string& name) {
  return ends_with(name, "attn.c_attn.weight") || ends_with(name, "attn.c_proj.weight") ||
         ends_with(name, "mlp.c_fc.weight") || ends_with(name, "mlp.c_proj.weight");
}

}  // namespace

GPTConfig hf_gpt2_config(const std::string& path, int64_t n_head) {
  auto t = hf_tensors(path);
  auto need = [&](const char* name) -> const Tensor& {
    auto it = t.find(name);
    TANDEM_CHECK_KIND(IO, it != t.end() && it->second.dim() == 2, "'{}': no 2-D {} (not a GPT-2 checkpoint?)", path,
                      name);
    return it->second;
  };
  GPTConfig c;
  c.vocab_size = need("wte.weight").size(0);
  c.n_embd = need("wte.weight").size(1);
  c.context = need("wpe.weight").size(0);
  c.n_head = n_head;
  c.n_layer = 0;
  while (t.count("h." + std::to_string(c.n_layer) + ".ln_1.weight")) ++c.n_layer;
  TANDEM_CHECK_KIND(IO, c.n_layer > 0, "'{}': no h.0.* blocks (not a GPT-2 checkpoint?)", path);
  TANDEM_CHECK_KIND(IO, c.n_embd > 0 && need("wpe.weight").size(1) == c.n_embd,
                    "'{}': wte.weight has shape {} and wpe.weight {}: both must be {} wide (n_embd > 0)", path,
                    shape_str(need("wte.weight").shape()), shape_str(need("wpe.weight").shape()), c.n_embd);
  // The model is made from this shape before its weights are read, so every tensor of it must be in
  // the file as GPT-2 has it: a file must not make a model larger than itself (a wpe of no values,
  // blocks of one LayerNorm each) and then fail to fill it.
  const auto expect = [&](const std::string& name, std::vector<int64_t> shape) {
    const auto it = t.find(name);
    TANDEM_CHECK_KIND(IO, it != t.end() && it->second.shape() == shape,
                      "'{}': {} is {}; a GPT-2 of width {} has it as {} (Hugging Face's layout)", path, name,
                      it == t.end() ? std::string("missing") : "of shape " + shape_str(it->second.shape()), c.n_embd,
                      shape_str(shape));
  };
  const int64_t w = c.n_embd;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    for (const char* ln : {"ln_1.", "ln_2."}) {
      expect(h + ln + "weight", {w});
      expect(h + ln + "bias", {w});
    }
    expect(h + "attn.c_attn.weight", {w, 3 * w});  // Conv1D: [in, out]
    expect(h + "attn.c_attn.bias", {3 * w});
    expect(h + "attn.c_proj.weight", {w, w});
    expect(h + "attn.c_proj.bias", {w});
    expect(h + "mlp.c_fc.weight", {w, 4 * w});
    expect(h + "mlp.c_fc.bias", {4 * w});
    expect(h + "mlp.c_proj.weight", {4 * w, w});
    expect(h + "mlp.c_proj.bias", {w});
  }
  expect("ln_f.weight", {w});
  expect("ln_f.bias", {w});
  c.check();
  return c;
}

void load_hf_gpt2(GPT& model, const std::string& path) {
  NoGradGuard no_grad;
  auto file = hf_tensors(path);
  NamedTensors state;
  for (const auto& [name, param] : model.named_parameters()) {
    auto it = file.find(name);
    TANDEM_CHECK_KIND(IO, it != file.end(), "'{}': no tensor {} for the model's parameter", path, name);
    Tensor t = ops::cast(it->second, param.dtype());
    if (is_conv1d(name) && t.dim() == 2) t = ops::transpose(t, 0, 1);  // Conv1D [in, out] -> [out, in]
    t = t.clone();  // contiguous, owned
    const bool embedding = name == "wte.weight" || name == "wpe.weight";
    if (embedding && t.dim() == 2 && t.size(1) == param.size(1) && t.shape() != param.shape()) {
      // wte: the file's vocabulary under a padded one (zero rows); wpe: the first `context` positions.
      const bool fits = name == "wte.weight" ? t.size(0) < param.size(0) : t.size(0) > param.size(0);
      TANDEM_CHECK_KIND(IO, fits, "'{}': {} has shape {}; the model needs {} (wte may have fewer rows, wpe more)",
                        path, name, shape_str(t.shape()), shape_str(param.shape()));
      Tensor full = Tensor::zeros(param.shape(), param.dtype());
      const int64_t rows = std::min(t.size(0), param.size(0));
      std::memcpy(full.data_ptr(), t.data_ptr(), static_cast<size_t>(rows * t.size(1)) * dtype_size(t.dtype()));
      t = full;
    }
    TANDEM_CHECK_KIND(IO, t.shape() == param.shape(), "'{}': {} has shape {}; the model needs {}", path, name,
                      shape_str(t.shape()), shape_str(param.shape()));
    state.emplace_back(name, t);
    file.erase(it);
  }
  TANDEM_CHECK_KIND(IO, file.empty(), "'{}': tensor {} has no place in the model ({} such)", path,
                    file.empty() ? "" : file.begin()->first, file.size());
  model.load_state_dict(state);
}

}  // namespace tandem::nn
