/* tandem's C API: a model, its loss, optimizer and LR schedule made from a YAML config file, trained
 * one step at a time on the caller's buffers, on the CPU or a GPU, on one process or data-parallel
 * over the host code's own MPI communicator. The shape of NVIDIA TorchFort's supervised-learning API
 * (tandem_model_create ~ torchfort_create_model, tandem_train ~ torchfort_train, ...), without
 * LibTorch.
 *
 * Every call returns a tandem_result_t; on failure tandem_last_error() has the message (per thread;
 * an empty string, never NULL, before any error). No exception and no exit() ever leaves a call: a
 * NULL handle, a bad shape or an unknown config key is an error code. The library never initialises
 * or finalises MPI in the calls that take the host's communicator.
 *
 * Threads: the host makes these calls from one thread at a time (any thread; the error message is
 * kept per thread). Models share state such as the generator that dropout and tandem_set_seed use,
 * so two threads training at once, even on different models, race on it.
 *
 * Arrays are row-major (C order): shape[0] is the batch. From Fortran, whose arrays are
 * column-major, the batch is the last dimension (see tandem.f90).
 */
#ifndef TANDEM_TANDEM_C_H
#define TANDEM_TANDEM_C_H

#include <stddef.h> /* NULL, which the calls take for handles and optional outputs: not left to mpi.h */
#include <stdint.h>

#include "tandem/version.h"

#if defined(TANDEM_HAVE_MPI)
#include <mpi.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The library exports these calls only (it is built with hidden visibility). */
#if defined(__GNUC__)
#define TANDEM_C_API __attribute__((visibility("default")))
#else
#define TANDEM_C_API
#endif

typedef enum {
  TANDEM_SUCCESS = 0,
  TANDEM_INVALID_USAGE = 1,   /* a bad argument: NULL handle or pointer, shape, dtype, config file or key */
  TANDEM_NOT_SUPPORTED = 2,   /* this build or machine cannot do it: no such device, no MPI */
  TANDEM_INTERNAL_ERROR = 3,  /* a bug of ours: please report it with the message */
  TANDEM_CUDA_ERROR = 4,      /* a CUDA, cuBLAS or cuDNN call failed */
  TANDEM_MPI_ERROR = 5,       /* an MPI call failed */
  TANDEM_NCCL_ERROR = 6,      /* an NCCL call failed */
  TANDEM_IO_ERROR = 7,        /* a checkpoint or config file is missing, truncated or corrupt */
  TANDEM_COMM_ERROR = 8,      /* a collective failed: a dead or hung rank (deadline), ranks that disagree */
  TANDEM_RESULT_FORCE_INT_ = 0x7fffffff /* not a result: keeps the type int-sized, any int value valid */
} tandem_result_t;

typedef enum {
  TANDEM_FLOAT32 = 0,
  TANDEM_FLOAT64 = 1,
  TANDEM_INT32 = 2, /* labels (class indices), and a gpt model's input token ids */
  TANDEM_INT64 = 3, /* labels (class indices), and a gpt model's input token ids */
  /* Not a dtype: keeps the type int-sized and any non-negative int a valid value of it, so that a
   * wrong value from C is an error code (TANDEM_INVALID_USAGE), not undefined behaviour in C++. */
  TANDEM_DTYPE_FORCE_INT_ = 0x7fffffff
} tandem_dtype_t;

/* A model with its optimizer, loss, schedule and (distributed) communicator. */
typedef struct tandem_model_s* tandem_model_t;
/* A list of the caller's arrays for the multi-argument calls (TorchFort's torchfort_tensor_list_t). */
typedef struct tandem_tensor_list_s* tandem_tensor_list_t;

/* The library's version ("0.1.0") and the calling thread's last error message. */
TANDEM_C_API const char* tandem_version(void);
TANDEM_C_API const char* tandem_last_error(void);

/* Seeds the initialisation of models created after it (instead of the config's training.seed) and
 * the default generator (dropout). */
TANDEM_C_API tandem_result_t tandem_set_seed(uint64_t seed);

/* A model from `config_file` (YAML: model, loss, optimizer, lr_scheduler, training, ddp) on `device`:
 * "cpu", "cuda", "cuda:N" or "auto" (a GPU when there is one, else the CPU). */
TANDEM_C_API tandem_result_t tandem_model_create(tandem_model_t* model, const char* config_file,
                                                 const char* device);

#if defined(TANDEM_HAVE_MPI)
/* The same, data-parallel over the host's communicator (collective over `comm`: every rank calls it).
 * Gradients are averaged over the ranks by DistributedDataParallel, overlapped with backward; every
 * rank starts from rank 0's weights. "auto" picks cuda:<local rank> where each rank of the node can
 * have a GPU of its own, else the CPU. MPI must be initialised by the host (any thread level: below
 * MPI_THREAD_MULTIPLE the collectives run on the calling thread, and the host must not call MPI from
 * another thread meanwhile). */
TANDEM_C_API tandem_result_t tandem_model_create_distributed(tandem_model_t* model, const char* config_file,
                                                             MPI_Comm comm, const char* device);
/* For Fortran: the communicator as an MPI_Fint (mpi_f08's comm%MPI_VAL, or an `integer` communicator). */
TANDEM_C_API tandem_result_t tandem_model_create_distributed_f(tandem_model_t* model, const char* config_file,
                                                               MPI_Fint comm, const char* device);
#endif

/* Frees the model (not collective). NULL is accepted and does nothing. */
TANDEM_C_API tandem_result_t tandem_model_destroy(tandem_model_t model);

/* One training step on a micro-batch: forward, loss against `label`, backward; every
 * training.accumulation_steps calls, the optimizer step (clipping, LR schedule, loss scaling as
 * configured). input: `input_rank` dims of `input_shape`, float32/float64 (converted to the model's
 * float32), or for a gpt model token ids [batch, positions], int32/int64; label: the loss's target
 * (mse/l1: the output's shape and a float type; cross_entropy: [batch] class indices, int32/int64,
 * or a gpt's next tokens [batch, positions]). Buffers are the caller's, in host memory or, on a GPU model,
 * device memory; they are only read. `loss` (may be NULL) receives this micro-batch's loss. Collective
 * in a distributed model. */
TANDEM_C_API tandem_result_t tandem_train(tandem_model_t model, const void* input, tandem_dtype_t input_dtype,
                                          int input_rank, const int64_t* input_shape, const void* label,
                                          tandem_dtype_t label_dtype, int label_rank, const int64_t* label_shape,
                                          float* loss);

/* The model's output for `input` (no gradient, evaluation mode: dropout off, batch norm's running
 * statistics), written to `output`, whose shape must be the output's (a gpt's: logits [batch,
 * positions, vocab_size]); float32 or float64. Local (not
 * collective). */
TANDEM_C_API tandem_result_t tandem_inference(tandem_model_t model, const void* input, tandem_dtype_t input_dtype,
                                              int input_rank, const int64_t* input_shape, void* output,
                                              tandem_dtype_t output_dtype, int output_rank,
                                              const int64_t* output_shape);

/* Lists of arrays for a model of several inputs or outputs (an ONNX graph's, in its order). A list
 * records each array's address, dtype and shape, not its data: the arrays must stay valid while a
 * call uses the list, and may change between calls (a list made once serves every step). */
TANDEM_C_API tandem_result_t tandem_tensor_list_create(tandem_tensor_list_t* list);
TANDEM_C_API tandem_result_t tandem_tensor_list_destroy(tandem_tensor_list_t list);
TANDEM_C_API tandem_result_t tandem_tensor_list_add_tensor(tandem_tensor_list_t list, void* data,
                                                           tandem_dtype_t dtype, int rank, const int64_t* shape);

/* tandem_train with several inputs (floating ones converted to float32, integer ones to int64) and
 * several labels, one per model output: the loss is the sum over the outputs of the configured loss
 * of output j against label j. Every array has the same batch (first dimension). Collective in a
 * distributed model. */
TANDEM_C_API tandem_result_t tandem_train_multiarg(tandem_model_t model, tandem_tensor_list_t inputs,
                                                   tandem_tensor_list_t labels, float* loss);
/* tandem_inference with several inputs and one output array per model output (float32 or float64,
 * each of its output's shape). Local (not collective). */
TANDEM_C_API tandem_result_t tandem_inference_multiarg(tandem_model_t model, tandem_tensor_list_t inputs,
                                                       tandem_tensor_list_t outputs);

/* Checkpoints to `dir`/ckpt-<step> (weights as safetensors, optimizer, schedule, scaler, RNG, step),
 * replacing `dir`/latest atomically. Collective in a distributed model: rank 0 writes, and when it
 * cannot, every rank returns TANDEM_IO_ERROR (rank 0's message says why) and the model goes on. */
TANDEM_C_API tandem_result_t tandem_save_checkpoint(tandem_model_t model, const char* dir);
/* Restores a checkpoint: `path` is a `dir` (its latest) or one `dir`/ckpt-<step>. Training then
 * continues bitwise as if it had never stopped. Every rank calls it. */
TANDEM_C_API tandem_result_t tandem_load_checkpoint(tandem_model_t model, const char* path);

/* Writes the model as an ONNX file at `path`, for onnxruntime or any other runtime: a model imported
 * from ONNX (model: {type: onnx}) as its graph with the trained weights and running statistics; an
 * mlp, cnn, sequential or gpt exported (opset 17; docs/onnx.md, "Exporting tandem's models").
 * Collective in a distributed model: rank 0 writes, as for checkpoints. Another model type:
 * TANDEM_NOT_SUPPORTED, naming it. */
TANDEM_C_API tandem_result_t tandem_save_onnx(tandem_model_t model, const char* path);

/* Optimizer steps taken so far. */
TANDEM_C_API tandem_result_t tandem_get_step(tandem_model_t model, int64_t* step);

#ifdef __cplusplus
}
#endif

#endif /* TANDEM_TANDEM_C_H */
