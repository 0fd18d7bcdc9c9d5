// openapi.json with the registry's model types.
#include "apps/tandem-serve/openapi.h"

#include "apps/tandem-serve/assets.h"
#include "nn/model_registry.h"

namespace tandem::serve {

nlohmann::json openapi_document() {
  nlohmann::json doc = nlohmann::json::parse(asset("openapi.json"));
  nlohmann::json types = nlohmann::json::array();
  for (const char* dataset : {"fashion-mnist", "text"})
    for (const std::string& t : nn::model_types(dataset)) types.push_back(t);
  doc.at("components").at("schemas").at("JobRequest").at("properties").at("model")["enum"] = types;
  return doc;
}

}  // namespace tandem::serve
