// The distributed C API under mpirun, with the host owning MPI at MPI_THREAD_SINGLE and handing in a
// communicator split from its world (as a simulation keeps MPI_COMM_WORLD for itself): N ranks, each
// training on its share of every batch, end with the weights of one process trained on the whole
// batch (compared through inference, to 1e-5); a checkpoint saved on N ranks resumes bitwise, and
// one rank 0 cannot write fails on every rank; the Fortran entry (MPI_Fint) gives the same model;
// a GPT on N ranks equals one process too; and after MPI_Finalize both entries answer an error.
#include <mpi.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tandem/tandem_c.h"
#include "tests/capi/capi_test_util.h"

namespace tandem::capi_test {
namespace {

constexpr int64_t kBatch = 12;  // divisible by 1, 2, 3 and 4 ranks
const int64_t kProbeX[2] = {kBatch, 4}, kProbeY[2] = {kBatch, 3};

struct World {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  World() {
    MPI_Comm_split(MPI_COMM_WORLD, 0, 0, &comm);  // the host's own communicator, not the world
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
  }
  ~World() { MPI_Comm_free(&comm); }
};

// A directory every rank sees: rank 0 makes (and at the end removes) it, the others learn its path.
struct SharedDir {
  std::unique_ptr<TempDir> owned;
  std::string path;
  explicit SharedDir(const World& w) {
    char buf[256] = {};
    if (w.rank == 0) {
      owned = std::make_unique<TempDir>();
      std::strncpy(buf, owned->path.c_str(), sizeof buf - 1);
    }
    MPI_Bcast(buf, sizeof buf, MPI_CHAR, 0, w.comm);
    path = buf;
  }
};

// The config file, written by rank 0 where every rank reads it.
std::string shared_config(const World& w, const SharedDir& dir, const std::string& extra = "") {
  if (w.rank == 0) dir.owned->write("run.yaml", mlp_config(extra));
  MPI_Barrier(w.comm);
  return dir.path + "/run.yaml";
}

void train_share(tandem_model_t m, const World& w, int64_t step) {
  const int64_t per = kBatch / w.size, begin = w.rank * per;
  std::vector<float> x, y;
  batch(step, begin, begin + per, x, y);
  const int64_t xs[2] = {per, 4}, ys[2] = {per, 3};
  float loss = -1;
  ASSERT_EQ(tandem_train(m, x.data(), TANDEM_FLOAT32, 2, xs, y.data(), TANDEM_FLOAT32, 2, ys, &loss), TANDEM_SUCCESS)
      << tandem_last_error();
}

void train_whole(tandem_model_t m, int64_t step) {
  std::vector<float> x, y;
  batch(step, 0, kBatch, x, y);
  ASSERT_EQ(tandem_train(m, x.data(), TANDEM_FLOAT32, 2, kProbeX, y.data(), TANDEM_FLOAT32, 2, kProbeY, nullptr),
            TANDEM_SUCCESS)
      << tandem_last_error();
}

std::vector<float> probe(tandem_model_t m) {
  std::vector<float> x, y, out(kBatch * 3);
  batch(999, 0, kBatch, x, y);
  EXPECT_EQ(tandem_inference(m, x.data(), TANDEM_FLOAT32, 2, kProbeX, out.data(), TANDEM_FLOAT32, 2, kProbeY),
            TANDEM_SUCCESS)
      << tandem_last_error();
  return out;
}

TEST(CApiMpi, NRanksMatchOneProcessOnTheWholeBatch) {
  World w;
  SharedDir shared(w);
  const std::string cfg = shared_config(w, shared);
  tandem_model_t dist = nullptr, single = nullptr;
  ASSERT_EQ(tandem_model_create_distributed(&dist, cfg.c_str(), w.comm, "cpu"), TANDEM_SUCCESS) << tandem_last_error();
  ASSERT_EQ(tandem_model_create(&single, cfg.c_str(), "cpu"), TANDEM_SUCCESS) << tandem_last_error();
  for (int64_t s = 0; s < 5; ++s) {
    train_share(dist, w, s);
    train_whole(single, s);
  }
  const std::vector<float> a = probe(dist), b = probe(single);
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(a[i], b[i], 1e-5 * std::max(1.0f, std::fabs(b[i]))) << "output " << i << " on rank " << w.rank;
  // Every rank holds the same weights, bit for bit.
  std::vector<float> root = a;
  MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, w.comm);
  EXPECT_EQ(std::memcmp(root.data(), a.data(), a.size() * sizeof(float)), 0);
  tandem_model_destroy(dist);
  tandem_model_destroy(single);
  MPI_Barrier(w.comm);  // rank 0 removes the directory once every rank is done with it
}

// ddp.zero_stage 1 and 2 (docs/zero.md): this rank's shard of the optimizer, the same weights as
// stage 0 bit for bit, with the training block's clipping; a checkpoint written at stage 1 resumes
// bitwise at stages 2 and 0.
TEST(CApiMpi, ZeroStagesGiveStageZeroBits) {
  World w;
  SharedDir shared(w);
  auto config = [&](int stage) {
    const std::string name = "zero" + std::to_string(stage) + ".yaml";
    if (w.rank == 0)
      shared.owned->write(name, mlp_config("  grad_clip: 0.05\nddp:\n  zero_stage: " + std::to_string(stage) + "\n"));
    MPI_Barrier(w.comm);
    return shared.path + "/" + name;
  };
  auto create = [&](int stage) {
    tandem_model_t m = nullptr;
    EXPECT_EQ(tandem_model_create_distributed(&m, config(stage).c_str(), w.comm, "cpu"), TANDEM_SUCCESS)
        << tandem_last_error();
    return m;
  };
  auto expect_same = [&](const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what << " on rank " << w.rank;
  };
  std::vector<float> stage0;
  for (int stage = 0; stage <= 2; ++stage) {
    tandem_model_t m = create(stage);
    for (int64_t s = 0; s < 5; ++s) train_share(m, w, s);
    if (stage == 0) stage0 = probe(m);
    else expect_same(stage0, probe(m), "zero_stage " + std::to_string(stage) + " vs 0");
    tandem_model_destroy(m);
  }
  const std::string ck = shared.path + "/zero_ck";
  tandem_model_t first = create(1);
  for (int64_t s = 0; s < 2; ++s) train_share(first, w, s);
  ASSERT_EQ(tandem_save_checkpoint(first, ck.c_str()), TANDEM_SUCCESS) << tandem_last_error();
  tandem_model_destroy(first);
  for (int stage : {2, 0}) {
    tandem_model_t resumed = create(stage);
    ASSERT_EQ(tandem_load_checkpoint(resumed, ck.c_str()), TANDEM_SUCCESS) << tandem_last_error();
    for (int64_t s = 2; s < 5; ++s) train_share(resumed, w, s);
    expect_same(stage0, probe(resumed), "saved at zero_stage 1, resumed at " + std::to_string(stage));
    tandem_model_destroy(resumed);
  }
  MPI_Barrier(w.comm);
}

// The same for a GPT (token ids; the tied embedding's gradient reduced once): N ranks on their share
// of 12 sequences end with one process's weights on all 12. AdamW's eps is 1e-6 as in the app's DDP
// test: the key bias's gradient is zero but for rounding, which a smaller eps would blow up.
TEST(CApiMpi, GptOnNRanksMatchesOneProcess) {
  World w;
  SharedDir shared(w);
  if (w.rank == 0)
    shared.owned->write("gpt.yaml", "model:\n  type: gpt\n  parameters: {n_layer: 1, n_head: 2, n_embd: 16, "
                                    "context: 8, vocab_size: 12}\nloss: {type: cross_entropy}\noptimizer:\n"
                                    "  type: adamw\n  parameters: {learning_rate: 0.01, eps: 1.0e-6}\n");
  MPI_Barrier(w.comm);
  const std::string cfg = shared.path + "/gpt.yaml";
  constexpr int64_t kT = 8, kV = 12;
  const auto tokens = [&](int64_t step, int64_t begin, int64_t end, int64_t shift) {
    std::vector<int64_t> ids;
    for (int64_t b = begin; b < end; ++b)
      for (int64_t t = 0; t < kT; ++t) ids.push_back((b * 5 + t * 7 + step * 3 + shift) % kV);
    return ids;
  };
  const auto train = [&](tandem_model_t m, int64_t step, int64_t begin, int64_t end) {
    const std::vector<int64_t> x = tokens(step, begin, end, 0), y = tokens(step, begin, end, 1);
    const int64_t shape[2] = {end - begin, kT};
    ASSERT_EQ(tandem_train(m, x.data(), TANDEM_INT64, 2, shape, y.data(), TANDEM_INT64, 2, shape, nullptr),
              TANDEM_SUCCESS) << tandem_last_error();
  };
  tandem_model_t dist = nullptr, single = nullptr;
  ASSERT_EQ(tandem_model_create_distributed(&dist, cfg.c_str(), w.comm, "cpu"), TANDEM_SUCCESS) << tandem_last_error();
  ASSERT_EQ(tandem_model_create(&single, cfg.c_str(), "cpu"), TANDEM_SUCCESS) << tandem_last_error();
  const int64_t per = kBatch / w.size;
  for (int64_t s = 0; s < 4; ++s) {
    train(dist, s, w.rank * per, (w.rank + 1) * per);
    train(single, s, 0, kBatch);
  }
  const std::vector<int64_t> probe_ids = tokens(99, 0, kBatch, 0);
  const int64_t ids_shape[2] = {kBatch, kT}, logits_shape[3] = {kBatch, kT, kV};
  std::vector<float> a(kBatch * kT * kV), b(a.size());
  ASSERT_EQ(tandem_inference(dist, probe_ids.data(), TANDEM_INT64, 2, ids_shape, a.data(), TANDEM_FLOAT32, 3,
                             logits_shape), TANDEM_SUCCESS) << tandem_last_error();
  ASSERT_EQ(tandem_inference(single, probe_ids.data(), TANDEM_INT64, 2, ids_shape, b.data(), TANDEM_FLOAT32, 3,
                             logits_shape), TANDEM_SUCCESS) << tandem_last_error();
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], 1e-5 * std::max(1.0f, std::fabs(b[i]))) << "logit " << i << " on rank " << w.rank;
  tandem_model_destroy(dist);
  tandem_model_destroy(single);
  MPI_Barrier(w.comm);
}

TEST(CApiMpi, CheckpointOnNRanksResumesBitwiseAndFortranCommWorks) {
  World w;
  SharedDir shared(w);
  const std::string cfg = shared_config(w, shared);
  const std::string ck = shared.path + "/ck";
  tandem_model_t straight = nullptr, first = nullptr, resumed = nullptr;
  // All three on the same device: "auto" is the GPU where one is free for this rank, else the CPU
  // (a GPU run and a CPU run agree to rounding, not bit for bit).
  ASSERT_EQ(tandem_model_create_distributed(&straight, cfg.c_str(), w.comm, "auto"), TANDEM_SUCCESS)
      << tandem_last_error();
  ASSERT_EQ(tandem_model_create_distributed_f(&first, cfg.c_str(), MPI_Comm_c2f(w.comm), "auto"), TANDEM_SUCCESS)
      << tandem_last_error();
  for (int64_t s = 0; s < 4; ++s) train_share(straight, w, s);
  for (int64_t s = 0; s < 2; ++s) train_share(first, w, s);
  ASSERT_EQ(tandem_save_checkpoint(first, ck.c_str()), TANDEM_SUCCESS) << tandem_last_error();
  tandem_model_destroy(first);
  ASSERT_EQ(tandem_model_create_distributed(&resumed, cfg.c_str(), w.comm, "auto"), TANDEM_SUCCESS)
      << tandem_last_error();
  ASSERT_EQ(tandem_load_checkpoint(resumed, ck.c_str()), TANDEM_SUCCESS) << tandem_last_error();
  for (int64_t s = 2; s < 4; ++s) train_share(resumed, w, s);
  const std::vector<float> a = probe(straight), b = probe(resumed);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "rank " << w.rank;
  tandem_model_destroy(straight);
  tandem_model_destroy(resumed);
  MPI_Barrier(w.comm);
}

// Rank 0 cannot write the checkpoint (its folder would be inside a file): every rank gets
// TANDEM_IO_ERROR at once, none waits out the communicator's deadline in a barrier rank 0 never
// joins, and the model goes on training and saving: the ranks' collectives are still in step.
TEST(CApiMpi, CheckpointRankZeroCannotWriteFailsOnEveryRank) {
  World w;
  SharedDir shared(w);
  const std::string cfg = shared_config(w, shared);
  if (w.rank == 0) shared.owned->write("a-file", "not a folder\n");
  MPI_Barrier(w.comm);
  tandem_model_t m = nullptr;
  ASSERT_EQ(tandem_model_create_distributed(&m, cfg.c_str(), w.comm, "auto"), TANDEM_SUCCESS) << tandem_last_error();
  train_share(m, w, 0);
  const std::string bad = shared.path + "/a-file/ck", good = shared.path + "/ck";
  EXPECT_EQ(tandem_save_checkpoint(m, bad.c_str()), TANDEM_IO_ERROR) << "rank " << w.rank << ": " << tandem_last_error();
  const std::string why = tandem_last_error();
  EXPECT_NE(why.find(w.rank == 0 ? "a-file" : "rank 0 could not write it"), std::string::npos) << why;
  train_share(m, w, 1);
  EXPECT_EQ(tandem_save_checkpoint(m, good.c_str()), TANDEM_SUCCESS) << tandem_last_error();
  tandem_model_destroy(m);
  MPI_Barrier(w.comm);
}

TEST(CApiMpi, NullCommunicatorIsInvalidUsage) {
  TempDir dir;
  const std::string cfg = dir.write("run.yaml", mlp_config());
  tandem_model_t m = nullptr;
  EXPECT_EQ(tandem_model_create_distributed(&m, cfg.c_str(), MPI_COMM_NULL, "cpu"), TANDEM_INVALID_USAGE);
  EXPECT_NE(std::string(tandem_last_error()).find("MPI_COMM_NULL"), std::string::npos) << tandem_last_error();
  EXPECT_EQ(m, nullptr);
}

}  // namespace
}  // namespace tandem::capi_test

// The host's main: MPI at the lowest thread level, initialised and finalised by the host alone.
int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) ::testing::GTEST_FLAG(brief) = true;
  ::testing::InitGoogleTest(&argc, argv);
  int rc = RUN_ALL_TESTS();
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  // After the host finalised MPI, both entries answer with an error code: no MPI call that MPI
  // forbids then (MPI_Comm_f2c would abort the process).
  tandem_model_t m = nullptr;
  const tandem_result_t c = tandem_model_create_distributed(&m, "unused.yaml", MPI_COMM_WORLD, "cpu");
  const bool c_ok = c == TANDEM_INVALID_USAGE && std::strstr(tandem_last_error(), "finalised") != nullptr;
  const tandem_result_t f = tandem_model_create_distributed_f(&m, "unused.yaml", 0, "cpu");
  const bool f_ok = f == TANDEM_INVALID_USAGE && std::strstr(tandem_last_error(), "finalised") != nullptr;
  if (!c_ok || !f_ok || m != nullptr) {
    std::fprintf(stderr, "rank %d: creating a model after MPI_Finalize gave %d (C) and %d (Fortran): %s\n", rank,
                 static_cast<int>(c), static_cast<int>(f), tandem_last_error());
    return 1;
  }
  return worst;
}
