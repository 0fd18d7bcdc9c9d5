// The C API (include/tandem/tandem_c.h): argument checks, and every exception turned into a result
// code and a per-thread message, so that nothing but a code crosses the C boundary.
#include "tandem/tandem_c.h"

#include <mpi.h>

#include <cstdint>
#include <mutex>
#include <new>
#include <optional>
#include <string>

#include <fmt/ranges.h>

#include "comm/mpi/mpi_comm.h"
#include "embed/c/backend_result.h"
#include "embed/c/session.h"
#include "runtime/backend/cpu_isa.h"
#include "runtime/env_settings.h"
#include "runtime/error.h"
#include "runtime/random.h"
#if defined(TANDEM_HAVE_CUDA)
#include "comm/nccl/nccl_comm.h"
#endif

struct tandem_model_s {
  std::unique_ptr<tandem::embed::Session> session;
};

// The caller's arrays for the multi-argument calls: addresses, dtypes and shapes, never the data.
struct tandem_tensor_list_s {
  std::vector<tandem::embed::ArrayRef> arrays;
};

namespace {

using tandem::DType;
using tandem::Shape;
using tandem::embed::ArrayRef;

thread_local std::string g_last_error;  // the calling thread's last failure
thread_local const char* g_last_error_text = "";  // its text, or a fixed one where it could not be kept
std::mutex g_seed_mutex;
std::optional<uint64_t> g_seed;  // tandem_set_seed's, for models created after it

// Keeps "<function>: <message>" for tandem_last_error. It runs in guarded's handlers, where a
// bad_alloc would end the process (guarded is noexcept): without memory for the text, a fixed one.
tandem_result_t fail(tandem_result_t code, const char* function, const char* message) noexcept {
  try {
    g_last_error.assign(function).append(": ").append(message);
    g_last_error_text = g_last_error.c_str();
  } catch (...) {
    g_last_error_text = "tandem: out of memory (not even for this call's error message)";
  }
  return code;
}

// Runs f, mapping what it throws to a code (and the message to tandem_last_error()).
template <class F>
tandem_result_t guarded(const char* function, F&& f) noexcept {
  try {
    f();
    return TANDEM_SUCCESS;
  } catch (const tandem::ValueError& e) {
    return fail(TANDEM_INVALID_USAGE, function, e.what());
  } catch (const tandem::NotSupportedError& e) {
    return fail(TANDEM_NOT_SUPPORTED, function, e.what());
  } catch (const tandem::IOError& e) {
    return fail(TANDEM_IO_ERROR, function, e.what());
  } catch (const tandem::CommError& e) {
    return fail(TANDEM_COMM_ERROR, function, e.what());
  } catch (const tandem::BackendError& e) {
    return fail(tandem::embed::backend_result(e.what()), function, e.what());
  } catch (const std::bad_alloc&) {
    return fail(TANDEM_INTERNAL_ERROR, function, "out of memory");
  } catch (const std::exception& e) {
    return fail(TANDEM_INTERNAL_ERROR, function, e.what());
  } catch (...) {
    return fail(TANDEM_INTERNAL_ERROR, function, "an unknown exception");
  }
}

tandem::embed::Session& session_of(tandem_model_t model) {
  TANDEM_CHECK(model != nullptr && model->session, "the model is NULL; create it with tandem_model_create");
  return *model->session;
}

std::string text_arg(const char* what, const char* s) {
  TANDEM_CHECK(s != nullptr, "{} is NULL", what);
  return s;
}

DType dtype_of(const char* what, tandem_dtype_t t) {
  switch (t) {
    case TANDEM_FLOAT32: return DType::f32;
    case TANDEM_FLOAT64: return DType::f64;
    case TANDEM_INT32: return DType::i32;
    case TANDEM_INT64: return DType::i64;
    default: break;
  }
  TANDEM_FAIL(Value, "{}: unknown dtype {} (expected TANDEM_FLOAT32, TANDEM_FLOAT64, TANDEM_INT32 or TANDEM_INT64)",
              what, static_cast<int>(t));
}

Shape shape_of(const char* what, int rank, const int64_t* shape) {
  TANDEM_CHECK(rank >= 1 && rank <= 8, "{}: rank {} (expected 1 to 8 dimensions)", what, rank);
  TANDEM_CHECK(shape != nullptr, "{}: the shape is NULL", what);
  Shape s(shape, shape + rank);
  for (int d = 0; d < rank; ++d)
    TANDEM_CHECK(s[static_cast<size_t>(d)] >= 1, "{}: dimension {} is {} (expected >= 1)", what, d,
                 s[static_cast<size_t>(d)]);
  // Its bytes must be countable (an int64 of 8-byte elements): a larger product is a wrong shape,
  // and would overflow every size computed from it.
  int64_t numel = 1;
  for (int64_t n : s)
    TANDEM_CHECK(!__builtin_mul_overflow(numel, n, &numel) && numel <= INT64_MAX / 8,
                 "{}: shape [{}] is too large: its size in bytes overflows a 64-bit count", what,
                 fmt::join(s, ", "));
  return s;
}

ArrayRef array_of(const char* what, const void* data, tandem_dtype_t dtype, int rank, const int64_t* shape) {
  TANDEM_CHECK(data != nullptr, "{} is NULL", what);
  return ArrayRef{data, dtype_of(what, dtype), shape_of(what, rank, shape)};
}

const std::vector<ArrayRef>& arrays_of(const char* what, tandem_tensor_list_t list) {
  TANDEM_CHECK(list != nullptr, "{} is NULL; create it with tandem_tensor_list_create", what);
  TANDEM_CHECK(!list->arrays.empty(), "{}: the list is empty; add arrays with tandem_tensor_list_add_tensor", what);
  return list->arrays;
}

// Every array has the same batch (its first dimension).
void check_batches(const std::vector<ArrayRef>& a, const char* what_a, const std::vector<ArrayRef>& b,
                   const char* what_b) {
  const int64_t batch = a[0].shape[0];
  for (const auto& [list, what] : {std::pair{&a, what_a}, std::pair{&b, what_b}})
    for (size_t i = 0; i < list->size(); ++i)
      TANDEM_CHECK((*list)[i].shape[0] == batch, "{} {} has batch {} (its first dimension), {} 0 has {}", what, i,
                   (*list)[i].shape[0], what_a, batch);
}

std::optional<uint64_t> seed() {
  std::lock_guard<std::mutex> lock(g_seed_mutex);
  return g_seed;
}

tandem_result_t create(const char* function, tandem_model_t* model, const char* config_file, const char* device,
                       const MPI_Comm* comm) {
  if (model) *model = nullptr;
  return guarded(function, [&] {
    TANDEM_CHECK(model != nullptr, "the model pointer is NULL (pass the address of a tandem_model_t)");
    tandem::env::check();      // a bad TANDEM_* value is this call's error (the kernels ignore some)
    tandem::cpu_isa_in_use();
    const std::string config = text_arg("config_file", config_file), name = text_arg("device", device);
    std::shared_ptr<tandem::comm::Communicator> c;
    if (comm) {
      int initialised = 0, finalised = 0;
      MPI_Initialized(&initialised);
      MPI_Finalized(&finalised);
      TANDEM_CHECK(initialised && !finalised, "MPI is not initialised{}: the host code initialises MPI "
                   "(MPI_Init_thread) before creating a distributed model, and tandem leaves it to the host",
                   finalised ? " (or already finalised)" : "");
      TANDEM_CHECK(*comm != MPI_COMM_NULL, "the communicator is MPI_COMM_NULL");
      const int node_rank = tandem::comm::local_rank(*comm), node_size = tandem::comm::local_size(*comm);
      const tandem::Device d = tandem::embed::pick_device(name, true, node_rank, node_size);
      if (d.kind == tandem::DeviceKind::CUDA) {
        TANDEM_CHECK(d.index == node_rank, "device {}: a distributed model on GPUs uses cuda:<its rank on the "
                     "node> (cuda:{} here); pass \"cuda\" or \"auto\"", d.str(), node_rank);
#if defined(TANDEM_HAVE_CUDA)
        c = tandem::comm::make_nccl_communicator(*comm);
#endif
      } else {
        c = tandem::comm::make_mpi_communicator(*comm);
      }
    }
    auto handle = std::make_unique<tandem_model_s>();
    handle->session = std::make_unique<tandem::embed::Session>(config, name, std::move(c), seed());
    *model = handle.release();
  });
}

}  // namespace

extern "C" {

const char* tandem_version(void) { return TANDEM_VERSION; }

const char* tandem_last_error(void) { return g_last_error_text; }

tandem_result_t tandem_set_seed(uint64_t seed) {
  return guarded("tandem_set_seed", [&] {
    std::lock_guard<std::mutex> lock(g_seed_mutex);
    g_seed = seed;
    tandem::manual_seed(seed);
  });
}

tandem_result_t tandem_model_create(tandem_model_t* model, const char* config_file, const char* device) {
  return create("tandem_model_create", model, config_file, device, nullptr);
}

tandem_result_t tandem_model_create_distributed(tandem_model_t* model, const char* config_file, MPI_Comm comm,
                                                const char* device) {
  return create("tandem_model_create_distributed", model, config_file, device, &comm);
}

tandem_result_t tandem_model_create_distributed_f(tandem_model_t* model, const char* config_file, MPI_Fint comm,
                                                  const char* device) {
  // MPI_Comm_f2c is not allowed before MPI_Init or after MPI_Finalize (Open MPI aborts the job):
  // create() then says which of the two it is.
  int initialised = 0, finalised = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalised);
  MPI_Comm c = initialised && !finalised ? MPI_Comm_f2c(comm) : MPI_COMM_NULL;
  return create("tandem_model_create_distributed_f", model, config_file, device, &c);
}

tandem_result_t tandem_model_destroy(tandem_model_t model) {
  return guarded("tandem_model_destroy", [&] { delete model; });
}

tandem_result_t tandem_train(tandem_model_t model, const void* input, tandem_dtype_t input_dtype, int input_rank,
                             const int64_t* input_shape, const void* label, tandem_dtype_t label_dtype,
                             int label_rank, const int64_t* label_shape, float* loss) {
  return guarded("tandem_train", [&] {
    auto& s = session_of(model);
    const ArrayRef x = array_of("input", input, input_dtype, input_rank, input_shape);
    const ArrayRef y = array_of("label", label, label_dtype, label_rank, label_shape);
    TANDEM_CHECK(x.shape[0] == y.shape[0], "input has batch {} (its first dimension), label has {}", x.shape[0],
                 y.shape[0]);
    const double value = s.train({x}, {y});
    if (loss) *loss = static_cast<float>(value);
  });
}

tandem_result_t tandem_inference(tandem_model_t model, const void* input, tandem_dtype_t input_dtype,
                                 int input_rank, const int64_t* input_shape, void* output,
                                 tandem_dtype_t output_dtype, int output_rank, const int64_t* output_shape) {
  return guarded("tandem_inference", [&] {
    auto& s = session_of(model);
    const ArrayRef x = array_of("input", input, input_dtype, input_rank, input_shape);
    TANDEM_CHECK(output != nullptr, "output is NULL");
    const DType out_dtype = dtype_of("output", output_dtype);
    TANDEM_CHECK(tandem::is_floating(out_dtype), "output: float32 or float64, got {}", tandem::dtype_name(out_dtype));
    s.inference({x}, {ArrayRef{output, out_dtype, shape_of("output", output_rank, output_shape)}});
  });
}

tandem_result_t tandem_tensor_list_create(tandem_tensor_list_t* list) {
  if (list) *list = nullptr;
  return guarded("tandem_tensor_list_create", [&] {
    TANDEM_CHECK(list != nullptr, "the list pointer is NULL (pass the address of a tandem_tensor_list_t)");
    *list = new tandem_tensor_list_s();
  });
}

tandem_result_t tandem_tensor_list_destroy(tandem_tensor_list_t list) {
  return guarded("tandem_tensor_list_destroy", [&] { delete list; });
}

tandem_result_t tandem_tensor_list_add_tensor(tandem_tensor_list_t list, void* data, tandem_dtype_t dtype, int rank,
                                              const int64_t* shape) {
  return guarded("tandem_tensor_list_add_tensor", [&] {
    TANDEM_CHECK(list != nullptr, "the list is NULL; create it with tandem_tensor_list_create");
    list->arrays.push_back(array_of("array", data, dtype, rank, shape));
  });
}

tandem_result_t tandem_train_multiarg(tandem_model_t model, tandem_tensor_list_t inputs, tandem_tensor_list_t labels,
                                      float* loss) {
  return guarded("tandem_train_multiarg", [&] {
    auto& s = session_of(model);
    const std::vector<ArrayRef>& x = arrays_of("inputs", inputs);
    const std::vector<ArrayRef>& y = arrays_of("labels", labels);
    check_batches(x, "input", y, "label");
    const double value = s.train(x, y);
    if (loss) *loss = static_cast<float>(value);
  });
}

tandem_result_t tandem_inference_multiarg(tandem_model_t model, tandem_tensor_list_t inputs,
                                          tandem_tensor_list_t outputs) {
  return guarded("tandem_inference_multiarg", [&] {
    auto& s = session_of(model);
    const std::vector<ArrayRef>& x = arrays_of("inputs", inputs);
    const std::vector<ArrayRef>& y = arrays_of("outputs", outputs);
    for (const ArrayRef& o : y)
      TANDEM_CHECK(tandem::is_floating(o.dtype), "outputs: float32 or float64 arrays, got {}",
                   tandem::dtype_name(o.dtype));
    check_batches(x, "input", y, "output");
    s.inference(x, y);
  });
}

tandem_result_t tandem_save_checkpoint(tandem_model_t model, const char* dir) {
  return guarded("tandem_save_checkpoint", [&] { session_of(model).save(text_arg("dir", dir)); });
}

tandem_result_t tandem_save_onnx(tandem_model_t model, const char* path) {
  return guarded("tandem_save_onnx", [&] { session_of(model).save_onnx(text_arg("path", path)); });
}

tandem_result_t tandem_load_checkpoint(tandem_model_t model, const char* path) {
  return guarded("tandem_load_checkpoint", [&] { session_of(model).load(text_arg("path", path)); });
}

tandem_result_t tandem_get_step(tandem_model_t model, int64_t* step) {
  return guarded("tandem_get_step", [&] {
    TANDEM_CHECK(step != nullptr, "step is NULL");
    *step = session_of(model).step();
  });
}

}  // extern "C"
