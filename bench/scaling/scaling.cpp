// tandem-bench-scaling: one JSON line (rank 0) per run under `mpirun -np N`: the DDP training step
// of the mlp, the cnn or a GPT (random tokens; AdamW with decay on matrices as tandem-train) at a
// per-rank batch, with the gradient all-reduce and without it (same compute
// and bucket copies, all-reduce skipped), the all-reduce time of the same buckets on its own, and
// the fraction of that time hidden under backward. Step times are the slowest rank's median.
// The one-rank baseline is measured in the same job: each rank in turn trains alone while the
// others sleep (the cores of a machine are not all equally fast; the baseline averages them).
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "apps/common/cli_checks.h"
#include "train/host_memory.h"
#include "comm/mpi/mpi_check.h"
#include "comm/mpi/mpi_comm.h"
#include "nn/config/run_config.h"
#include "nn/gpt.h"
#include "nn/models.h"
#include "nn/optim.h"
#include "nn/parallel/ddp.h"
#include "nn/parallel/metrics.h"
#include "nn/parallel/reducer.h"
#include "runtime/error.h"
#include "runtime/ops.h"

using namespace tandem;
using tandem::app::kNonNegative;
using tandem::app::kPositive;
using nn::parallel::DDPOptions;
using nn::parallel::DistributedDataParallel;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// CPU seconds of the whole rank (compute and communication threads): unlike wall time, it does not
// grow when other processes take the cores, so it tells work added by communication from waiting.
double cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Timings {
  std::vector<double> step_s, wait_s, cpu_s;
};

struct Setup {
  std::string model;
  std::string gpt_size;  // model gpt: nn::GPTConfig::preset's name
  int64_t batch;
  DDPOptions ddp;
};

// A model, its DDP wrapper and optimizer: one per mode, so the modes never share hooks or state.
struct Runner {
  std::shared_ptr<nn::Module> net;
  std::unique_ptr<DistributedDataParallel> ddp;
  std::unique_ptr<nn::Optimizer> opt;
  int64_t vocab = 0;  // gpt: logits per position

  Runner(const Setup& s, std::shared_ptr<comm::Communicator> comm, bool skip) {
    Generator gen(0);
    if (s.model == "gpt") {
      auto gpt = std::make_shared<nn::GPT>(nn::GPTConfig::preset(s.gpt_size), gen);
      vocab = gpt->config().vocab_size;
      net = gpt;
    } else {
      auto seq = nn::make_model(s.model, gen);
      seq->fuse_batchnorm_epilogues();  // as tandem-train runs it
      net = seq;
    }
    ddp = std::make_unique<DistributedDataParallel>(net, comm, s.ddp);
    ddp->reducer().skip_allreduce_for_benchmarks(skip);
    if (s.model == "gpt") {  // AdamW, decay on the matrices, as tandem-train's gpt
      nn::config::OptimizerConfig oc;
      oc.type = nn::config::OptimizerType::AdamW;
      oc.learning_rate = 1e-4;
      oc.weight_decay = 0.1;
      opt = nn::config::build_optimizer(oc, ddp->parameters(), nn::config::DecayOn::Matrices);
    } else {
      nn::SGDOptions so;
      so.lr = 0.01;
      so.momentum = 0.9;
      opt = std::make_unique<nn::SGD>(ddp->parameters(), so);
    }
  }

  void step(const Tensor& x, const Tensor& y) {
    opt->zero_grad();
    Tensor out = ddp->forward(x);
    Tensor loss = ops::cross_entropy(vocab > 0 ? ops::reshape(out, {-1, vocab}) : out, y);
    loss.backward();
    ddp->finalize();
    opt->step();
  }
};

// The 1-minute load average: step times are only meaningful on an otherwise idle machine.
double load_average() {
  double l = -1;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &l) != 1) l = -1;
    std::fclose(f);
  }
  return l;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tandem-bench-scaling: DDP step time with and without communication (run under mpirun)",
               "tandem-bench-scaling"};
  std::string model = "mlp", gpt_size = "small";
  int64_t batch = 128, steps = 10, warmup = 5, rounds = 9;
  int threads = 1;
  DDPOptions ddp;  // its defaults are the flags' defaults
  bool no_broadcast_buffers = false;
  app.add_option("--model", model, "mlp, cnn or gpt")
      ->check(CLI::IsMember({"mlp", "cnn", "gpt"}))
      ->capture_default_str();
  app.add_option("--gpt-size", gpt_size, "gpt: tiny, small (tandem-train's default shape) or gpt2-124m")
      ->check(CLI::IsMember({"tiny", "small", "gpt2-124m"}))
      ->capture_default_str();
  app.add_option("--batch-size", batch, "samples (gpt: sequences) per step per rank")
      ->check(kPositive)
      ->capture_default_str();
  app.add_option("--steps", steps, "timed steps per round and mode")->check(kPositive)->capture_default_str();
  app.add_option("--warmup", warmup, "untimed steps per mode first")->check(kNonNegative)->capture_default_str();
  app.add_option("--rounds", rounds, "rounds alternating the two modes")->check(kPositive)->capture_default_str();
  app.add_option("--threads", threads, "compute threads per rank")->check(kPositive)->capture_default_str();
  app.add_option("--bucket-cap-mb", ddp.bucket_cap_mb, "DDP bucket cap")->check(kPositive)->capture_default_str();
  app.add_option("--first-bucket-mb", ddp.first_bucket_mb, "DDP first bucket cap")->check(kPositive)->capture_default_str();
  app.add_flag("--gradient-as-bucket-view", ddp.gradient_as_bucket_view, "gradients live in the buckets");
  app.add_flag("--no-broadcast-buffers", no_broadcast_buffers, "skip DDP's per-forward broadcast of BN buffers");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "tandem-bench-scaling: %s\n\n%s", e.what(), app.help().c_str());
    return 2;
  }
  try {
    app::keep_freed_host_memory();  // as tandem-train does
    omp_set_num_threads(threads);
    auto comm = comm::make_mpi_communicator();
    const int rank = comm->rank(), world = comm->size();
    ddp.broadcast_buffers = !no_broadcast_buffers;
    Setup setup{model, gpt_size, batch, ddp};
    Runner with_comm(setup, comm, false), without_comm(setup, comm, true);
    // The one-rank baseline, measured in this job between the N-rank rounds (side by side, so the
    // ratio survives the machine's drift between separate launches): each rank in turn alone with
    // DDP over a communicator of its own, while the other ranks sleep (not spin) until it is done.
    std::unique_ptr<Runner> solo;
    std::shared_ptr<comm::Communicator> solo_comm;
    if (world > 1) {
      MPI_Comm split = MPI_COMM_NULL;
      MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, rank, 0, &split));
      solo_comm = comm::make_mpi_communicator(split);
      solo = std::make_unique<Runner>(setup, solo_comm, false);
    }

    // Per-rank data (ranks see different samples, as under a DistributedSampler).
    Generator gen(1000 + static_cast<uint64_t>(rank));
    Shape in_shape = model == "cnn" ? Shape{batch, 1, 28, 28} : Shape{batch, 784};
    const int64_t context = model == "gpt" ? nn::GPTConfig::preset(gpt_size).context : 0;
    std::vector<Tensor> xs, ys;
    for (int i = 0; i < 4; ++i) {
      if (model == "gpt") {  // random tokens: the step's cost does not depend on them
        std::vector<int64_t> x(static_cast<size_t>(batch * context)), y(x.size());
        for (size_t k = 0; k < x.size(); ++k) {
          x[k] = static_cast<int64_t>((k * 2654435761u + static_cast<size_t>(i + 7 * rank)) % 251);
          y[k] = static_cast<int64_t>((k * 40503u + static_cast<size_t>(i)) % 251);
        }
        xs.push_back(Tensor::from_vector(x, {batch, context}));
        ys.push_back(Tensor::from_vector(y, {batch * context}));
        continue;
      }
      xs.push_back(rand_normal(in_shape, 0.0, 1.0, gen));
      std::vector<int64_t> labels(static_cast<size_t>(batch));
      for (int64_t k = 0; k < batch; ++k) labels[static_cast<size_t>(k)] = (k * 7 + i) % 10;
      ys.push_back(Tensor::from_vector(labels, {batch}));
    }

    auto run = [&](Runner& r, int64_t n, Timings* t) {
      for (int64_t s = 0; s < n; ++s) {
        const double t0 = now_s(), c0 = cpu_s();
        r.step(xs[static_cast<size_t>(s % 4)], ys[static_cast<size_t>(s % 4)]);
        if (t) {
          t->step_s.push_back(now_s() - t0);
          t->cpu_s.push_back(cpu_s() - c0);
          t->wait_s.push_back(r.ddp->reducer().stats().wait_s);
        }
      }
    };
    // Each rank's solo steps in turn; the others wait without taking a core: a nonblocking
    // barrier, tested between short sleeps (MPI's blocking barrier would spin).
    auto solo_phase = [&](int64_t n, Timings* t) {
      if (world == 1) return;
      for (int alone = 0; alone < world; ++alone) {
        if (rank == alone) run(*solo, n, t);
        MPI_Request req;
        MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &req));
        for (int done = 0; !done;) {
          MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
          if (!done) usleep(200);
        }
      }
    };
    run(with_comm, warmup, nullptr);
    run(without_comm, warmup, nullptr);
    solo_phase(warmup, nullptr);
    Timings tc, tn, ts;
    for (int64_t round = 0; round < rounds; ++round) {
      comm->barrier()->wait();
      run(with_comm, steps, &tc);
      comm->barrier()->wait();
      run(without_comm, steps, &tn);
      solo_phase(steps, &ts);
    }

    // The same buckets' all-reduces on their own (launched back to back, as backward would).
    std::vector<Tensor> buffers;  // in the communicator's memory, as the buckets are
    for (int64_t bytes : with_comm.ddp->reducer().bucket_bytes())
      buffers.push_back(comm->make_buffer(bytes / 4, DType::f32));
    std::vector<double> comm_s;
    for (int rep = 0; rep < 20; ++rep) {
      comm->barrier()->wait();
      const double t0 = now_s();
      std::vector<comm::WorkPtr> works;
      for (auto& b : buffers) works.push_back(comm->allreduce(b.data_ptr(), b.numel(), DType::f32, comm::ReduceOp::Avg));
      for (auto& w : works) w->wait();
      comm_s.push_back(now_s() - t0);
    }

    // The slowest rank sets the pace.
    const double step = nn::parallel::allreduce_max(*comm, median(tc.step_s));
    const double step_nocomm = nn::parallel::allreduce_max(*comm, median(tn.step_s));
    const double wait = nn::parallel::allreduce_max(*comm, median(tc.wait_s));
    const double allreduce = nn::parallel::allreduce_max(*comm, median(comm_s));
    const double cpu = nn::parallel::allreduce_max(*comm, median(tc.cpu_s));
    const double cpu_nocomm = nn::parallel::allreduce_max(*comm, median(tn.cpu_s));
    const double exposed = std::max(0.0, step - step_nocomm);
    // The one-rank step: the mean over ranks (cores) of each one's median step alone.
    std::vector<double> solo_steps(static_cast<size_t>(world));
    const double my_solo = ts.step_s.empty() ? step : median(ts.step_s);
    MPI_CHECK(MPI_Gather(&my_solo, 1, MPI_DOUBLE, solo_steps.data(), 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    auto clamp01 = [](double v) { return std::min(1.0, std::max(0.0, v)); };
    if (rank == 0) {
      // Weak-scaling efficiency from the solo rounds of this job: throughput(N) / (N throughput(1))
      // = solo step / N-rank step at a fixed per-rank batch.
      double step_solo = 0;
      for (double v : solo_steps) step_solo += v / world;
      std::vector<double> solo_ms;
      for (double v : solo_steps) solo_ms.push_back(1e3 * v);
      int64_t grad_bytes = 0;
      for (int64_t b : with_comm.ddp->reducer().bucket_bytes()) grad_bytes += b;
      nlohmann::json j{{"bench", "scaling"},
                       {"model", model == "gpt" ? "gpt-" + gpt_size : model},
                       {"world_size", world},
                       {"batch_per_rank", batch},
                       {"threads_per_rank", threads},
                       {"buckets", static_cast<int64_t>(buffers.size())},
                       {"buckets_launched_during_backward", with_comm.ddp->reducer().stats().launched_early},
                       {"grad_bytes", grad_bytes},
                       {"gradient_as_bucket_view", ddp.gradient_as_bucket_view},
                       {"broadcast_buffers", !no_broadcast_buffers},
                       {"step_ms", 1e3 * step},
                       {"step_ms_nocomm", 1e3 * step_nocomm},
                       {"samples_per_s", static_cast<double>(batch * world) / step},
                       {"samples_per_s_nocomm", static_cast<double>(batch * world) / step_nocomm},
                       {"tokens_per_s", context > 0 ? static_cast<double>(batch * context * world) / step : 0.0},
                       {"comm_overhead", step / step_nocomm},
                       {"step_ms_solo", 1e3 * step_solo},
                       {"step_ms_solo_per_rank", solo_ms},
                       {"efficiency_side_by_side", step_solo / step},
                       {"cpu_ms", 1e3 * cpu},
                       {"cpu_ms_nocomm", 1e3 * cpu_nocomm},
                       {"load_avg", load_average()},
                       {"allreduce_ms", 1e3 * allreduce},
                       {"exposed_wait_ms", 1e3 * wait},
                       // Two estimates of the share of all-reduce time spent under backward.
                       {"hidden_fraction", allreduce > 0 ? clamp01(1.0 - exposed / allreduce) : 1.0},
                       {"hidden_fraction_wait", allreduce > 0 ? clamp01(1.0 - wait / allreduce) : 1.0}};
      std::printf("%s\n", j.dump().c_str());
      std::fflush(stdout);
    }
  } catch (const CommError& e) {
    comm::abort_job(e.what());
  } catch (const Error& e) {
    std::fprintf(stderr, "tandem-bench-scaling: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
