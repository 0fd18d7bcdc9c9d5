// openapi.json with the closed sets of words filled in from where tandem declares them.
#include "apps/tandem-serve/openapi.h"

#include <vector>

#include "apps/tandem-serve/assets.h"
#include "nn/config/run_config.h"
#include "nn/model_registry.h"
#include "runtime/enum_names.h"
#include "train/parallel_mode.h"

namespace tandem::serve {

nlohmann::json openapi_document() {
  nlohmann::json doc = nlohmann::json::parse(asset("openapi.json"));
  nlohmann::json& job = doc.at("components").at("schemas").at("JobRequest").at("properties");
  nlohmann::json types = nlohmann::json::array();
  for (const char* dataset : {"fashion-mnist", "text"})
    for (const std::string& t : nn::model_types(dataset)) types.push_back(t);
  // A registered model, or (the second alternative) a FILE.onnx of the server's --models-dir.
  job.at("model").at("anyOf").at(0)["enum"] = types;
  // The words tandem-train's flags and a run-config file take for the same settings.
  job.at("optimizer")["enum"] = enum_words<nn::config::OptimizerType>();
  job.at("amp")["enum"] = enum_words<nn::config::Amp>();
  job.at("mode")["enum"] = enum_words<train::ParallelMode>();
  job.at("loss")["enum"] = enum_words<nn::config::LossType>();
  // Not step: a job has no field for its step size.
  job.at("lr_schedule")["enum"] = std::vector<std::string>{enum_name(nn::config::ScheduleType::Cosine),
                                                           enum_name(nn::config::ScheduleType::Constant)};
  return doc;
}

}  // namespace tandem::serve
