// The API description that tandem-serve validates jobs against and serves at /openapi.json: the
// embedded openapi.json with JobRequest's choices filled in where tandem declares them: model's
// registered names from the model registry (the models tandem-train has data for), optimizer, amp,
// mode, loss and lr_schedule from the words of their enums (runtime/enum_names.h), so that neither is described twice.
#pragma once
#include <nlohmann/json.hpp>

namespace tandem::serve {

nlohmann::json openapi_document();

}  // namespace tandem::serve
