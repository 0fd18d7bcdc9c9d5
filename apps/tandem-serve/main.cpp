// tandem-serve: the training-job server. A REST API (openapi.json) over tandem-train jobs that it
// launches with mpirun, queues over its slots, keeps in a state directory across restarts and
// cancels; a dashboard page at /; Prometheus metrics. Loopback and a bearer token by default.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <CLI/CLI.hpp>
#include <httplib.h>

#include "apps/common/cli_checks.h"
#include "train/factory.h"
#include "apps/common/loopback.h"
#include "apps/tandem-serve/auth.h"
#include "apps/tandem-serve/job_manager.h"
#include "apps/tandem-serve/job_paths.h"
#include "apps/tandem-serve/job_schema.h"
#include "apps/tandem-serve/launcher.h"
#include "apps/tandem-serve/openapi.h"
#include "apps/tandem-serve/process.h"
#include "apps/tandem-serve/routes.h"
#include "apps/tandem-serve/serve_config.h"
#include "apps/tandem-serve/supervisor.h"
#include "runtime/error.h"
#include "tandem/version.h"

using namespace tandem;
using tandem::app::kNonNegative;
using tandem::app::kPositive;
using namespace tandem::serve;

namespace {

int serve_main(const ServeConfig& cfg) {
  const bool loopback = app::is_loopback_address(cfg.bind);
  TANDEM_CHECK(loopback || !cfg.token_file.empty(),
               "--bind {} is not a loopback address: give --token-file, every call will need its token", cfg.bind);
  const std::string state_dir = std::filesystem::weakly_canonical(std::filesystem::absolute(cfg.state_dir)).string();
  // Canonical: a restarted server recognises its jobs' supervisors by this path in their argv.
  JobStore store(state_dir);
  const std::string token_path = state_dir + "/token";
  const std::string token = load_or_make_token(cfg.token_file, token_path);

  ManagerOptions mo;
  mo.self_exe = self_executable();
  std::string flavor_why = std::string(cfg.mpi_flavor) + " (--mpi-flavor)";
  if (cfg.launcher == "local") {  // under slurm, srun starts the ranks: no mpirun on this machine needed
    mo.mpirun = find_executable(cfg.mpirun);
    TANDEM_CHECK(!mo.mpirun.empty(), "--mpirun {}: not found or not executable", cfg.mpirun);
    mo.flavor = cfg.mpi_flavor == "auto" ? detect_flavor(mo.mpirun, &flavor_why) : parse_flavor(cfg.mpi_flavor);
  }
  mo.tandem_train = cfg.tandem_train.empty() ? default_tandem_train(mo.self_exe) : cfg.tandem_train;
  mo.tandem_train = std::filesystem::absolute(mo.tandem_train).string();
  TANDEM_CHECK(::access(mo.tandem_train.c_str(), X_OK) == 0, "--tandem-train {}: not found or not executable",
               mo.tandem_train);
  mo.slots = cfg.slots > 0 ? cfg.slots : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (cfg.launcher == "slurm") {
    // The nodes write each job's log, metrics, checkpoints and exit record into the state directory
    // and run tandem-serve (the supervisor) and tandem-train by this server's paths.
    TANDEM_CHECK(cfg.state_dir_given, "--launcher slurm: give --state-dir, a folder on a filesystem shared with the "
                 "Slurm nodes at the same path (the jobs write their logs, metrics, checkpoints and exit records "
                 "there); tandem-serve and tandem-train must be at the same paths on the nodes too");
    validate_slurm_options(cfg.slurm);
    check_slurm_reachable(cfg.slurm);
    mo.slurm = cfg.slurm;
    mo.slots = cfg.slots > 0 ? cfg.slots : 1024;  // Slurm queues the jobs: --slots caps one job's ranks only
  }
  mo.cancel_grace_s = cfg.cancel_grace_s;
  mo.poll_s = cfg.poll_s;
  if (!cfg.models_dir.empty()) mo.roots.models_dir = canonical_folder("--models-dir", cfg.models_dir);
  if (!cfg.data_dir.empty()) mo.roots.data_dir = canonical_folder("--data-dir", cfg.data_dir);
  // mpirun refuses to run as root unless told: a root server's jobs are as intended as the server.
  if (::geteuid() == 0) {
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  }

  // SIGINT/SIGTERM end the server (not its jobs) from a thread of their own; blocked everywhere
  // else, which every thread created below inherits.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  JobSchema schema(openapi_document());
  JobManager jobs(mo, store);
  jobs.start();

  httplib::Server server;
  // httplib's default adds SO_REUSEPORT, with which a second server on the same port would bind it
  // too and take half the connections: SO_REUSEADDR only (a port in use is an error).
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  server.new_task_queue = [n = cfg.http_threads] { return new httplib::ThreadPool(static_cast<size_t>(n)); };
  server.set_payload_max_length(cfg.max_body_bytes);
  // One request per connection: a request refused before its body is read (routes.cpp) leaves
  // that body in the connection, and the next request must not be read from it. It also keeps an
  // idle client from holding one of the --http-threads workers between its requests.
  server.set_keep_alive_max_count(1);
  server.set_read_timeout(10);
  ApiContext ctx{cfg, jobs, schema, token, loopback, {}, {}};
  install_routes(server, ctx);

  int port = cfg.port;
  if (port == 0) {
    port = server.bind_to_any_port(cfg.bind);
    TANDEM_CHECK_KIND(IO, port > 0, "cannot bind {}: {}", cfg.bind, std::strerror(errno));
  } else {
    TANDEM_CHECK_KIND(IO, server.bind_to_port(cfg.bind, port), "cannot bind {}:{}: {}", cfg.bind, port,
                      std::strerror(errno));
  }
  std::printf("tandem-serve %s: listening on http://%s:%d (state %s, %d slots, tandem-train %s)\n",
              tandem::version(), cfg.bind.c_str(), port, state_dir.c_str(), mo.slots, mo.tandem_train.c_str());
  if (mo.slurm) {
    std::printf("tandem-serve: jobs submitted to Slurm with sbatch (partition %s, time limit %s, %d GPUs per node), "
                "their ranks started by srun --mpi=%s; %s must be shared with the nodes\n",
                mo.slurm->partition.empty() ? "the default" : mo.slurm->partition.c_str(),
                mo.slurm->time_limit.empty() ? "the partition's" : mo.slurm->time_limit.c_str(),
                mo.slurm->gpus_per_node, mo.slurm->mpi.c_str(), state_dir.c_str());
  } else {
    std::printf("tandem-serve: jobs launched by %s, as %s\n", mo.mpirun.c_str(), flavor_why.c_str());
  }
  if (cfg.token_file.empty()) std::printf("tandem-serve: token for changing calls: %s\n", token_path.c_str());
  if (!mo.roots.models_dir.empty())
    std::printf("tandem-serve: jobs' model files from %s (--models-dir)\n", mo.roots.models_dir.c_str());
  if (!mo.roots.data_dir.empty())
    std::printf("tandem-serve: jobs' array files from %s (--data-dir)\n", mo.roots.data_dir.c_str());
  std::fflush(stdout);

  std::atomic<bool> signalled{false};
  std::thread stopper([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    signalled = true;
    server.stop();
  });
  server.listen_after_bind();
  if (!signalled) ::kill(::getpid(), SIGTERM);  // listen ended by itself: wake the stopper
  stopper.join();
  jobs.stop();
  std::printf("tandem-serve: stopped; running jobs keep running and are taken back by the next start\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == kSuperviseArg) return run_supervisor(argc, argv);

  ServeConfig cfg;
  CLI::App cli{"tandem-serve: a REST API, a queue and a dashboard over tandem-train jobs", "tandem-serve"};
  cli.add_option("--port", cfg.port, "TCP port (0: any free port, printed at start)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cli.add_option("--bind", cfg.bind, "address to listen on; a non-loopback one needs --token-file")->capture_default_str();
  auto* state_dir_opt = cli.add_option("--state-dir", cfg.state_dir,
                                       "jobs, their logs, metrics and checkpoints; kept across restarts (--launcher "
                                       "slurm: on a filesystem shared with the nodes)")
                           ->capture_default_str();
  cli.add_option("--token-file", cfg.token_file,
                 "bearer token (first line) required by changing calls and by every call on a non-loopback "
                 "address; default: a fresh token in <state-dir>/token")
      ->check(CLI::ExistingFile);
  cli.add_option("--mpirun", cfg.mpirun, "mpirun to launch jobs with")->capture_default_str();
  cli.add_option("--mpi-flavor", cfg.mpi_flavor,
                 "the launcher's flags: openmpi (--bind-to none --oversubscribe --output-filename), mpich "
                 "(Hydra's mpiexec: none), or auto: from `<mpirun> --version`, openmpi when it names neither")
      ->check(CLI::IsMember({"auto", "openmpi", "mpich"}))
      ->capture_default_str();
  cli.add_option("--tandem-train", cfg.tandem_train, "tandem-train binary (default: the one built or installed "
                                                      "next to tandem-serve)");
  cli.add_option("--models-dir", cfg.models_dir,
                 "folder of the ONNX models a job may name (\"model\": \"net.onnx\", relative to it); without it "
                 "jobs train only the built-in models");
  cli.add_option("--data-dir", cfg.data_dir,
                 "folder of the array files a job may name (\"data\", \"val_data\": .npy, .npz, .h5, relative to "
                 "it); without it jobs train only on the built-in data sets");
  cli.add_option("--max-body-bytes", cfg.max_body_bytes, "largest request body accepted (413 above)")
      ->check(kPositive)
      ->capture_default_str();
  cli.add_option("--slots", cfg.slots, "ranks that run at once (cores, or GPUs on a GPU node; 0: the core count)")
      ->check(kNonNegative)
      ->capture_default_str();
  cli.add_option("--cancel-grace", cfg.cancel_grace_s, "seconds from a cancel's SIGTERM to SIGKILL")
      ->check(kNonNegative)
      ->capture_default_str();
  cli.add_option("--http-threads", cfg.http_threads, "HTTP worker threads")->check(kPositive)->capture_default_str();
  cli.add_option("--launcher", cfg.launcher,
                 "local: jobs run here under mpirun (queued over --slots); slurm: each job is a Slurm batch job "
                 "(sbatch, ranks started by srun; Slurm queues them), needs --state-dir shared with the nodes")
      ->check(CLI::IsMember({"local", "slurm"}))
      ->capture_default_str();
  cli.add_option("--slurm-partition", cfg.slurm.partition, "--launcher slurm: sbatch --partition (default: Slurm's)");
  cli.add_option("--slurm-time-limit", cfg.slurm.time_limit,
                 "--launcher slurm: sbatch --time, e.g. 60, 2:00:00, 1-12 (default: the partition's)");
  cli.add_option("--slurm-gpus-per-node", cfg.slurm.gpus_per_node, "--launcher slurm: sbatch --gpus-per-node (0: none)")
      ->check(kNonNegative)
      ->capture_default_str();
  cli.add_option("--slurm-mpi", cfg.slurm.mpi,
                 "--launcher slurm: srun --mpi plugin through which the ranks meet (srun --mpi=list; Open MPI: pmix)")
      ->capture_default_str();
  cli.set_version_flag("--version", std::string("tandem-serve ") + tandem::version());
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli.exit(e);
  }
  cfg.state_dir_given = state_dir_opt->count() > 0;
  return app::run_guarded("tandem-serve", [&] { return serve_main(cfg); });
}
