// Global-norm gradient clipping over DistributedDataParallel's parameters, computed in one order
// for every zero_stage, so that ZeRO clips exactly as DDP does: rank r's partial sum of squares
// covers chunk Communicator::owned_chunk(r) of every bucket (slice by slice, buckets in order, each
// slice summed in f64 from its first element), and the N partial sums are added in rank order.
// Stage 0 holds every gradient and computes every partial itself; ZeRO computes its own and
// all-gathers the others. (This differs from nn::clip_grad_norm's order, parameter by parameter,
// in the last bits of the f64 norm: DDP runs in the train loops take this one at every stage.)
#pragma once
#include "nn/parallel/ddp.h"

namespace tandem::nn::parallel {

// The L2 norm of the averaged gradients (after a finished backward). Collective at zero_stage > 0.
double ranked_grad_norm(DistributedDataParallel& ddp);
// As nn::clip_grad_norm: scales the gradients (stage 0: the parameters' .grad; ZeRO: the shards')
// by max_norm / (norm + 1e-6) when that is < 1; returns the norm. ValueError for a non-finite norm.
double clip_grad_norm_ranked(DistributedDataParallel& ddp, double max_norm);

}  // namespace tandem::nn::parallel
