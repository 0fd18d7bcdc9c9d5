// The files every rank reads, checked at start (see rank_inputs.h).
#include "apps/common/rank_inputs.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "apps/common/config_file.h"
#include "comm/launcher_env.h"
#include "runtime/error.h"

namespace tandem::app {

std::vector<RankInput> rank_inputs_from_flags(int argc, char** argv) {
  std::vector<RankInput> out;
  for (const char* flag : {"--config", "--data", "--val-data", "--data-dir", "--text-dir", "--tokenizer",
                           "--init-from"})
    if (auto v = flag_value(argc, argv, flag); v && !v->empty()) out.push_back({flag, *v});
  if (auto model = flag_value(argc, argv, "--model"); model && is_onnx_file(*model)) out.push_back({"--model", *model});
  return out;
}

std::vector<RankInput> rank_inputs_from_config(const TrainConfig& cfg) {
  std::vector<RankInput> out;
  if (cfg.model.type == "onnx" && !cfg.model.filename.empty())
    out.push_back({cfg.config_path.empty() ? "--model" : "model.filename (--config)", cfg.model.filename});
  if (cfg.model.type != "gpt" && cfg.data_file.empty() && !cfg.data_dir.empty())
    out.push_back({"--data-dir", cfg.data_dir});
  return out;
}

void check_rank_inputs(const std::vector<RankInput>& inputs) {
  const comm::LauncherEnv env = comm::launcher_env();
  if (env.world_size <= 1) return;
  std::vector<std::string> unseen;
  for (const RankInput& in : inputs) {
    // Read access for a file; read and search for a folder (its files are opened by name).
    if (::access(in.path.c_str(), R_OK) == 0) continue;
    const int err = errno;
    unseen.push_back(fmt::format("{} {} ({})", in.flag, in.path, std::strerror(err)));
  }
  if (unseen.empty()) return;
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  TANDEM_FAIL(Value,
              "rank {} of {} (host {}) cannot read {}. Every rank reads its input files itself: on several nodes "
              "they must be on a filesystem shared by the nodes, at the same path on each (or copied to each node); "
              "only --resume's checkpoint is read by rank 0 alone and broadcast",
              env.rank, env.world_size, host, fmt::join(unseen, ", "));
}

}  // namespace tandem::app
