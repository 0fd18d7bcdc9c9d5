/* The C API header compiled as C (no C++ in it): creates a model, trains a step, destroys it. */
#include <stddef.h>
#include <stdint.h>

#include "tandem/tandem_c.h"

int capi_c_smoke(const char* config_file) {
  tandem_model_t model = NULL;
  tandem_result_t rc = tandem_model_create(&model, config_file, "cpu");
  if (rc != TANDEM_SUCCESS) return (int)rc;
  float x[2 * 4] = {0.1f, 0.2f, 0.3f, 0.4f, -0.1f, -0.2f, -0.3f, -0.4f};
  float y[2 * 3] = {0};
  int64_t xs[2] = {2, 4}, ys[2] = {2, 3};
  float loss = -1.0f;
  rc = tandem_train(model, x, TANDEM_FLOAT32, 2, xs, y, TANDEM_FLOAT32, 2, ys, &loss);
  tandem_model_destroy(model);
  if (rc != TANDEM_SUCCESS) return (int)rc;
  return loss >= 0.0f ? 0 : 100;
}
