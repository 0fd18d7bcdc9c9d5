// tandem's C++ API in one include: tensors and autograd, every op, the nn modules, optimizers and
// LR schedules, mixed precision, DistributedDataParallel / DataParallel / SyncBatchNorm, training
// checkpoints, the model registry and run configs, the training engine (train/: the Trainer, its
// data-parallel setup, checkpoints and resume, the user's arrays as batches), and the communicator
// (with make_mpi_communicator where tandem was built with MPI).
// Installed as <tandem/tandem.h>; the headers it includes are installed under include/tandem/.
#pragma once

#include "tandem/version.h"

#include "comm/communicator.h"
#include "nn/amp/grad_scaler.h"
#include "nn/checkpoint_sequential.h"
#include "nn/ema.h"
#include "nn/config/run_config.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/model_registry.h"
#include "nn/models.h"
#include "nn/onnx/onnx_export.h"
#include "nn/onnx/onnx_model.h"
#include "nn/module.h"
#include "nn/optim.h"
#include "nn/parallel/data_parallel.h"
#include "nn/parallel/ddp.h"
#include "nn/parallel/distributed_sampler.h"
#include "nn/parallel/rank_memory.h"
#include "nn/parallel/sync_batch_norm.h"
#include "nn/parallel/zero_optimizer.h"
#include "nn/training_state.h"
#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "runtime/device_query.h"
#include "runtime/host_cache.h"
#include "runtime/memory_budget.h"
#include "runtime/ops.h"
#include "runtime/random.h"
#include "runtime/tensor.h"
#include "runtime/threads.h"
#include "runtime/trace.h"
#include "train/factory.h"
#include "train/parallel_setup.h"
#include "train/tensor_batches.h"
#include "train/train_features.h"
#include "train/trainer.h"
#if defined(TANDEM_HAVE_MPI)
#include "comm/mpi/mpi_comm.h"
#endif
