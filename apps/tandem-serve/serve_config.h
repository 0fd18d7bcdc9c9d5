// ServeConfig: tandem-serve's settings, filled from its command line (main.cpp).
#pragma once
#include <string>

#include "apps/tandem-serve/slurm.h"

namespace tandem::serve {

struct ServeConfig {
  int port = 8470;
  std::string bind = "127.0.0.1";
  std::string state_dir = "tandem-serve-state";
  std::string token_file;        // empty: a token is generated into <state_dir>/token
  std::string mpirun = "mpirun";  // looked up in PATH when it has no slash
  std::string mpi_flavor = "auto";  // its flags: auto (from --version), openmpi, mpich (launcher.h)
  std::string tandem_train;      // empty: next to tandem-serve's own binary
  std::string models_dir;        // jobs' FILE.onnx models, relative to it; empty: none taken
  std::string data_dir;          // jobs' array files (data, val_data), relative to it; empty: none taken
  size_t max_body_bytes = 64 * 1024;
  int slots = 0;                 // ranks that may run at once; 0: the core count
  double cancel_grace_s = 10;    // SIGTERM to SIGKILL
  double poll_s = 0.25;          // how often running jobs are checked and the queue advanced
  int http_threads = 32;  // a blocking reader per open connection: 32 pollers at once
  std::string launcher = "local";  // local: mpirun here; slurm: sbatch (slurm.h)
  bool state_dir_given = false;    // --launcher slurm needs --state-dir said, on a filesystem shared with the nodes
  SlurmOptions slurm;              // --slurm-*
};

}  // namespace tandem::serve
