#include "apps/common/export_model.h"

#include <optional>

#include "nn/ema.h"
#include "nn/onnx/onnx_export.h"

namespace tandem::app {

void save_evaluated_onnx(const train::FullTrainer& trainer, nn::Module& model, const std::string& path,
                         const train::Logger& log) {
  std::optional<nn::EMA::Scope> averaged;
  if (trainer.ema()) averaged.emplace(*trainer.ema(), model);
  nn::onnx::save_onnx(train::exported_model(model), path);
  log.info("tandem-train: wrote the trained model{} to {}", trainer.ema() ? " (--ema's average)" : "", path);
}

}  // namespace tandem::app
