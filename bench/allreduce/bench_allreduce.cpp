// tandem-bench-allreduce: in-place float32 all-reduce from 4 KB to 64 MB (powers of 4) with our
// flat ring (--algo ring), our hierarchical all-reduce (--algo hier: shared memory inside a node, a
// ring across nodes), the communicator's native path (--algo native: MPI_Iallreduce) and plain
// blocking MPI_Allreduce (--algo mpi). One JSON line per size and algo; time is the median over
// iterations (each the slowest rank's) after warm-up; busbw = algbw * 2(n-1)/n as nccl-tests, n all
// ranks, whatever the algorithm. Our algorithms also report the bytes each call sends across nodes
// (mean and most over the ranks, and all ranks together; null for MPI's own collectives).
// Also prints single-core memcpy bandwidth for comparison (alone, and with every rank copying). Run: mpirun -np 2 tandem-bench-allreduce
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "comm/mpi/mpi_comm.h"

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Single-core memcpy bandwidth (bytes copied per second), median of several copies.
double memcpy_gbps(size_t bytes) {
  std::vector<char> a(bytes, 1), b(bytes, 2);
  std::vector<double> t;
  for (int i = 0; i < 15; ++i) {
    auto t0 = Clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    t.push_back(seconds_since(t0));
    a[i] = b[bytes - 1 - i];  // keep the copies observable
  }
  return bytes / median(t) / 1e9;
}

struct Args {
  std::vector<std::string> algos;  // default: ring, hier (where the job spans nodes), native, mpi
  int64_t min_bytes = 4096, max_bytes = 64 << 20;
  int64_t segment_bytes = 0;
  double seconds_per_size = 0.4;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--algo") {
      a.algos.clear();
      std::stringstream ss(val());
      for (std::string s; std::getline(ss, s, ',');) a.algos.push_back(s);
    } else if (k == "--min-bytes") a.min_bytes = std::atoll(val().c_str());
    else if (k == "--max-bytes") a.max_bytes = std::atoll(val().c_str());
    else if (k == "--segment-bytes") a.segment_bytes = std::atoll(val().c_str());
    else if (k == "--seconds") a.seconds_per_size = std::atof(val().c_str());
    else {
      std::fprintf(stderr, "usage: %s [--algo ring,hier,native,mpi] [--min-bytes N] [--max-bytes N] "
                   "[--segment-bytes N] [--seconds S]\n", argv[0]);
      std::exit(k == "--help" ? 0 : 2);
    }
  }
  for (auto& s : a.algos)
    if (s != "ring" && s != "hier" && s != "native" && s != "mpi") {
      std::fprintf(stderr, "--algo: unknown '%s' (ring, hier, native, mpi)\n", s.c_str());
      std::exit(2);
    }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  Args args = parse(argc, argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  using namespace tandem::comm;
  {
    // memcpy on rank 0 alone (the others wait), then on every rank at once (what each core gets
    // while all of them stream memory, as during an all-reduce).
    for (size_t bytes : {size_t(16) << 20, size_t(64) << 20}) {
      double alone = rank == 0 ? memcpy_gbps(bytes) : 0.0;
      MPI_Barrier(MPI_COMM_WORLD);
      double together = memcpy_gbps(bytes);
      if (rank == 0)
        std::printf("{\"memcpy_bytes\":%zu,\"memcpy_GBps\":%.3f,\"memcpy_all_ranks_GBps\":%.3f}\n", bytes,
                    alone, together);
      std::fflush(stdout);
      MPI_Barrier(MPI_COMM_WORLD);
    }

    Options ring_opts, hier_opts, native_opts;
    ring_opts.algo = Options::Algo::Ring;
    ring_opts.segment_bytes = hier_opts.segment_bytes = args.segment_bytes;
    hier_opts.algo = Options::Algo::Hierarchical;
    native_opts.algo = Options::Algo::Native;
    auto ring = make_mpi_communicator(MPI_COMM_WORLD, ring_opts);
    auto native = make_mpi_communicator(MPI_COMM_WORLD, native_opts);
    const MpiTraffic layout = mpi_traffic(*ring);
    if (args.algos.empty()) {
      args.algos = {"ring", "native", "mpi"};
      if (layout.nodes > 1 && layout.ranks_per_node > 1) args.algos.insert(args.algos.begin() + 1, "hier");
    }
    std::shared_ptr<Communicator> hier;
    for (auto& a : args.algos)
      if (a == "hier" && !hier) hier = make_mpi_communicator(MPI_COMM_WORLD, hier_opts);
    auto comm_of = [&](const std::string& algo) { return algo == "ring" ? ring : algo == "hier" ? hier : native; };
    if (rank == 0)
      std::printf("{\"nodes\":%d,\"ranks_per_node\":%d}\n", layout.nodes, layout.ranks_per_node);
    MPI_Comm raw;
    MPI_Comm_dup(MPI_COMM_WORLD, &raw);

    for (int64_t bytes = args.min_bytes; bytes <= args.max_bytes; bytes *= 4) {
      const int64_t count = bytes / 4;
      std::vector<float> buf(static_cast<size_t>(count), 0.0f);  // zeros stay zeros: no overflow
      for (const std::string& algo : args.algos) {
        auto once = [&] {
          if (algo == "mpi")
            MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, raw);
          else
            comm_of(algo)->allreduce(buf.data(), count, tandem::DType::f32, ReduceOp::Sum)->wait();
        };
        const bool counted = algo == "ring" || algo == "hier";  // MPI's own traffic is not seen
        const uint64_t sent0 = counted ? mpi_traffic(*comm_of(algo)).cross_node_bytes : 0;
        // Warm-up (also sizes the persistent buffers), then pick an iteration count for the budget.
        MPI_Barrier(MPI_COMM_WORLD);
        auto t0 = Clock::now();
        for (int i = 0; i < 3; ++i) once();
        double per = seconds_since(t0) / 3;
        MPI_Allreduce(MPI_IN_PLACE, &per, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        int iters = static_cast<int>(std::clamp(args.seconds_per_size / std::max(per, 1e-7), 10.0, 2000.0));
        std::vector<double> times(static_cast<size_t>(iters));
        for (int i = 0; i < iters; ++i) {
          MPI_Barrier(MPI_COMM_WORLD);
          auto t1 = Clock::now();
          once();
          times[static_cast<size_t>(i)] = seconds_since(t1);
        }
        // Each iteration counts as long as its slowest rank.
        MPI_Allreduce(MPI_IN_PLACE, times.data(), iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        double t = median(times);
        double algbw = bytes / t / 1e9;
        double busbw = algbw * 2.0 * (n - 1) / n;
        // Bytes sent across nodes per call: the mean, the most and the sum over the ranks.
        std::string cross = "null", cross_max = "null", cross_all = "null";
        if (counted) {
          const double mine = double(mpi_traffic(*comm_of(algo)).cross_node_bytes - sent0) / double(iters + 3);
          double sum = 0, most = 0;
          MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
          MPI_Allreduce(&mine, &most, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
          cross = std::to_string(std::llround(sum / n));
          cross_max = std::to_string(std::llround(most));
          cross_all = std::to_string(std::llround(sum));
        }
        if (rank == 0)
          std::printf("{\"bytes\":%lld,\"ranks\":%d,\"algo\":\"%s\",\"time_us\":%.2f,\"algbw_GBps\":%.3f,"
                      "\"busbw_GBps\":%.3f,\"iters\":%d,\"nodes\":%d,\"cross_node_bytes_per_rank\":%s,"
                      "\"cross_node_bytes_max_rank\":%s,\"cross_node_bytes_all_ranks\":%s}\n",
                      static_cast<long long>(bytes), n, algo.c_str(), t * 1e6, algbw, busbw, iters, layout.nodes,
                      cross.c_str(), cross_max.c_str(), cross_all.c_str());
        std::fflush(stdout);
      }
    }
    MPI_Comm_free(&raw);
  }
  MPI_Finalize();
  return 0;
}
