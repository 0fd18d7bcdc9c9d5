// The API description that tandem-serve validates jobs against and serves at /openapi.json: the
// embedded openapi.json with JobRequest.model's choices taken from the model registry (the models
// tandem-train has data for), so that a model added to tandem is a job's choice without an edit here.
#pragma once
#include <nlohmann/json.hpp>

namespace tandem::serve {

nlohmann::json openapi_document();

}  // namespace tandem::serve
