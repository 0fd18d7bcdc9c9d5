// The gpt run of tandem-train: text batches, validation every N steps, the closing sample.
#include "apps/common/gpt_train.h"

#include <chrono>

#include <fmt/format.h>

#include "train/factory.h"
#include "apps/common/export_model.h"
#include "apps/common/run_services.h"
#include "train/train_features.h"
#include "nn/gpt.h"
#include "runtime/data/bpe_tokenizer.h"
#include "runtime/data/gpt2_pretokenize.h"
#include "runtime/data/text_corpus.h"

namespace tandem::app {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class GptTrainer;

// Validation every eval_every steps (not where the epoch ends: fit() evaluates there itself) and
// one "eval" record per evaluation, with training throughput since the last one.
class GptEvalHook final : public TrainerCallback {
 public:
  GptEvalHook(int64_t tokens_per_step, std::string loss_unit)
      : tokens_per_step_(tokens_per_step), loss_unit_(std::move(loss_unit)) {}
  void on_train_begin(Trainer& t) override {
    t0_ = now_s();
    step0_ = t.state().step;
  }
  void after_step(Trainer& t) override {
    trained_ = true;
    const int64_t every = t.config().gpt.eval_every, step = t.state().step;
    const bool epoch_ends = t.state().batch_in_epoch >= t.batches_per_epoch() ||
                            (t.config().max_steps > 0 && step >= t.config().max_steps);
    if (every <= 0 || step % every != 0 || epoch_ends) return;
    const double train_s = now_s() - t0_;
    EvalResult ev = t.evaluate();
    report(t, ev.loss, ev.accuracy, train_s);
  }
  void on_epoch_end(Trainer& t, const EpochStats& s) override {
    if (s.evaluated) report(t, s.test_loss, s.test_acc, now_s() - t0_);
  }
  double last_val_loss() const { return val_loss_; }
  const std::string& loss_unit() const { return loss_unit_; }

 private:
  void report(Trainer& t, double val_loss, double val_acc, double train_s) {
    const int64_t step = t.state().step;
    const double tokens_per_s =
        train_s > 0 ? static_cast<double>((step - step0_) * tokens_per_step_) / train_s : 0.0;
    val_loss_ = val_loss;
    // A run resumed at its last step (to sample from a checkpoint) trains nothing: no training loss.
    const std::string train_loss = trained_ ? fmt::format("train_loss {:.4f}  ", t.last_loss()) : std::string();
    t.log().info("step {}  {}val_loss {:.4f} {}  val_acc {:.4f}  lr {:.3g}  tokens/s {:.0f}", step, train_loss,
                 val_loss, loss_unit_, val_acc, t.optimizer().get_lr(), tokens_per_s);
    nlohmann::json record = {{"event", "eval"},
                             {"step", step},
                             {"epoch", t.state().epoch + 1},
                             {"val_loss", val_loss},
                             {"loss_unit", loss_unit_},
                             {"val_acc", val_acc},
                             {"lr", t.optimizer().get_lr()},
                             {"tokens_per_s", tokens_per_s}};
    if (trained_) record["train_loss"] = t.last_loss();
    t.metrics().write(record);
    t0_ = now_s();  // the next interval starts after this evaluation
    step0_ = step;
  }

  int64_t tokens_per_step_;
  std::string loss_unit_;  // nats/byte, or nats/token with a tokenizer
  double t0_ = 0, val_loss_ = -1;
  int64_t step0_ = 0;
  bool trained_ = false;  // a step has run in this process
};

class GptTrainer final : public FullTrainer {
 public:
  GptTrainer(const TrainConfig& cfg, ParallelSetup ps, std::unique_ptr<nn::Optimizer> optimizer,
             std::unique_ptr<data::BatchSource> train, std::unique_ptr<data::BatchSource> val, int64_t context,
             std::string loss_unit)
      : FullTrainer(cfg, std::move(ps), std::move(optimizer), std::move(train), std::move(val)) {
    const int64_t tokens = cfg.batch_size * context * world().size() * cfg.accumulation_steps;
    hook_ = std::make_shared<GptEvalHook>(tokens, std::move(loss_unit));
    add_callback(hook_);
  }
  double last_val_loss() const { return hook_->last_val_loss(); }

 protected:
  void fill_done_record(nlohmann::json& record) override {
    FullTrainer::fill_done_record(record);
    if (hook_->last_val_loss() >= 0) record["val_loss"] = hook_->last_val_loss();
    record["loss_unit"] = hook_->loss_unit();
  }

 private:
  std::shared_ptr<GptEvalHook> hook_;
};

// Bytes as printable UTF-8 text: control characters other than newline and tab, and each byte of
// an invalid UTF-8 sequence (a byte-level model samples those freely), shown as '?', so the log and
// a terminal always get valid UTF-8.
std::string printable(const std::vector<int64_t>& tokens) {
  std::string bytes;
  for (int64_t t : tokens) bytes.push_back(static_cast<char>(static_cast<unsigned char>(t)));
  std::string s;
  for (size_t i = 0; i < bytes.size();) {
    char32_t cp;
    const size_t n = data::next_code_point(bytes, i, cp);
    if (cp == data::kInvalidCodePoint || (cp < 0x20 && cp != '\n' && cp != '\t') || cp == 0x7F) s.push_back('?');
    else s.append(bytes, i, n);
    i += n;
  }
  return s;
}

// Token ids as text through the tokenizer (an id vocab.json leaves unused shown as '?'), then as
// printable bytes.
std::string printable(const std::vector<int64_t>& ids, const data::BpeTokenizer& bpe) {
  std::vector<int64_t> bytes;
  for (int64_t id : ids) {
    if (!bpe.has_token(id)) {
      bytes.push_back('?');
      continue;
    }
    for (unsigned char c : bpe.decode(std::vector<int64_t>{id})) bytes.push_back(c);
  }
  return printable(bytes);
}

std::string as_text(const std::vector<uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }

}  // namespace

// Weight decay on matrices and embeddings only, whichever optimizer (fused or not).
std::unique_ptr<nn::Optimizer> make_gpt_optimizer(const TrainConfig& cfg, const std::vector<Tensor>& params) {
  return nn::config::build_optimizer(cfg.optimizer, params, nn::config::DecayOn::Matrices);
}

int train_gpt(const TrainConfig& cfg, ParallelSetup ps, Device device) {
  Logger log(ps.rank(), cfg.quiet);
  auto gpt = std::dynamic_pointer_cast<nn::GPT>(ps.inner);
  TANDEM_CHECK(gpt, "--model gpt: the model is a {}, not a GPT", ps.inner->type_name());
  data::TextCorpus corpus = data::load_text_corpus(cfg.gpt.text_dir, cfg.gpt.val_fraction);
  log.info("text: {} files from {}: {} training and {} validation bytes (byte-unigram entropy {:.3f} nats); "
           "GPT {} layers, {} heads, width {}, context {}: {} parameters; weight decay {} on parameters of >= 2 dims",
           corpus.files.size(), cfg.gpt.text_dir, corpus.train.size(), corpus.val.size(),
           data::unigram_entropy_nats(corpus.train), gpt->config().n_layer, gpt->config().n_head,
           gpt->config().n_embd, gpt->config().context, gpt->config().num_parameters(), cfg.optimizer.weight_decay);
  if (!cfg.gpt.init_from.empty()) log.info("weights from {}", cfg.gpt.init_from);
  data::TextWindowsOptions wo;
  wo.batch_size = cfg.batch_size;
  wo.context = gpt->config().context;
  wo.world_size = ps.world_size();
  wo.rank = ps.rank();
  wo.seed = cfg.seed;
  std::unique_ptr<data::BpeTokenizer> bpe;
  std::unique_ptr<data::BatchSource> train, val;
  if (cfg.gpt.tokenizer.empty()) {  // byte tokens
    train = std::make_unique<data::TextWindows>(std::move(corpus.train), wo);
    wo.batch_size = cfg.eval_batch_size;
    val = std::make_unique<data::EvalWindows>(std::move(corpus.val), cfg.gpt.eval_windows, wo);
  } else {  // each split encoded on its own (the split falls between bytes, not tokens)
    bpe = std::make_unique<data::BpeTokenizer>(data::BpeTokenizer::from_dir(cfg.gpt.tokenizer));
    std::vector<int32_t> train_ids = bpe->encode(as_text(corpus.train)), val_ids = bpe->encode(as_text(corpus.val));
    log.info("tokenizer: {} tokens, {} merges from {}: {} training and {} validation tokens ({:.2f} bytes per "
             "validation token), vocabulary {} in the model",
             bpe->vocab_size(), bpe->num_merges(), cfg.gpt.tokenizer, train_ids.size(), val_ids.size(),
             static_cast<double>(corpus.val.size()) / static_cast<double>(std::max<size_t>(val_ids.size(), 1)),
             gpt->config().vocab_size);
    train = std::make_unique<data::TextWindows>(std::move(train_ids), wo);
    wo.batch_size = cfg.eval_batch_size;
    val = std::make_unique<data::EvalWindows>(std::move(val_ids), cfg.gpt.eval_windows, wo);
  }
  const std::string loss_unit = bpe ? "nats/token" : "nats/byte";
  log.info("validation: {}", val->describe());

  auto optimizer = make_gpt_optimizer(cfg, ps.model->parameters());
  GptTrainer trainer(cfg, ps, std::move(optimizer), std::move(train), std::move(val), wo.context, loss_unit);
  if (!cfg.resume_dir.empty()) trainer.resume(cfg.resume_dir);
  RunServices services(cfg, trainer, device, log);  // progress, --trace, step records, SIGTERM, --status-port
  TrainResult r = trainer.fit();
  services.finish();
  ps.sync_params();  // ZeRO: the last step's parameters, gathered, for the export and the sample below
  const std::string val_loss = trainer.last_val_loss() >= 0  // none with --no-eval
                                   ? fmt::format("val_loss {:.4f} {}", trainer.last_val_loss(), loss_unit)
                                   : std::string("no validation");
  log.result("done: {} steps, {}, {:.0f} tokens/s, world size {}, param_hash {}", r.steps, val_loss,
             r.samples_per_s * static_cast<double>(wo.context), ps.world_size(), trainer.param_hash());
  if (!cfg.save_onnx.empty() && ps.rank() == 0) save_evaluated_onnx(trainer, *gpt, cfg.save_onnx, log);

  if (ps.rank() == 0 && cfg.gpt.sample_tokens > 0) {
    nn::SampleOptions so;
    so.tokens = cfg.gpt.sample_tokens;
    so.temperature = cfg.gpt.temperature;
    so.top_k = cfg.gpt.top_k;
    so.seed = cfg.seed;
    std::vector<int64_t> prompt;
    if (bpe) {
      so.vocab_limit = bpe->vocab_size();  // not the padding rows
      for (int32_t id : bpe->encode(cfg.gpt.prompt.empty() ? std::string("\n") : cfg.gpt.prompt)) prompt.push_back(id);
    } else {
      for (unsigned char c : cfg.gpt.prompt) prompt.push_back(c);
      if (prompt.empty()) prompt.push_back('\n');
    }
    const std::vector<int64_t> ids = nn::sample(*gpt, prompt, so);
    log.result("sample (temperature {}, top-k {}):\n{}{}", so.temperature, so.top_k, cfg.gpt.prompt,
               bpe ? printable(ids, *bpe) : printable(ids));
  }
  return 0;
}

}  // namespace tandem::app
