// The state directory: job records, exit records, and summaries of a job's metrics and log.
#include "apps/tandem-serve/job_store.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "apps/tandem-serve/job_errors.h"
#include "runtime/serialization/atomic_file.h"
#include "runtime/serialization/json_integer.h"

namespace tandem::serve {

namespace ser = tandem::serialization;

JobStore::JobStore(std::string state_dir) : root_(std::move(state_dir)) { ser::make_directories(jobs_dir()); }

std::vector<Job> JobStore::load_all() const {
  std::vector<Job> jobs;
  for (const auto& name : ser::list_directory(jobs_dir())) {
    if (name.empty() || !std::all_of(name.begin(), name.end(), [](unsigned char c) { return std::isdigit(c); }))
      continue;
    const std::string path = jobs_dir() + "/" + name + "/" + kJobRecordFile;
    if (!ser::path_exists(path)) continue;
    try {
      jobs.push_back(job_from_json(nlohmann::json::parse(ser::read_file(path))));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tandem-serve: skipping the unreadable job record %s: %s\n", path.c_str(), e.what());
    }
  }
  std::sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) { return a.id < b.id; });
  return jobs;
}

void JobStore::save(const Job& job) const {
  ser::make_directories(job_dir(job.id));
  ser::write_file_atomic(record_path(job.id), to_json(job).dump(1) + "\n");
}

std::optional<ExitRecord> JobStore::read_exit(int64_t id) const {
  const std::string path = exit_path(id);
  if (!ser::path_exists(path)) return std::nullopt;
  try {
    auto j = nlohmann::json::parse(ser::read_file(path));
    ExitRecord r;
    if (!j["exit_code"].is_null()) r.exit_code = ser::json_integer<int>(j["exit_code"], "exit_code");
    if (!j["signal"].is_null()) r.signal = ser::json_integer<int>(j["signal"], "signal");
    r.finished_at = j.value("finished_at", 0.0);
    return r;
  } catch (const std::exception&) {
    return std::nullopt;  // written atomically, so a bad file is not ours: no result
  }
}

std::string read_tail(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const auto size = static_cast<size_t>(in.tellg());
  const size_t start = size > max_bytes ? size - max_bytes : 0;
  in.seekg(static_cast<std::streamoff>(start));
  std::string s(size - start, '\0');
  in.read(s.data(), static_cast<std::streamsize>(s.size()));
  s.resize(static_cast<size_t>(in.gcount()));
  if (start > 0) {
    auto nl = s.find('\n');
    s = nl == std::string::npos ? "" : s.substr(nl + 1);
  }
  return s;
}

MetricsSummary JobStore::summarize_metrics(int64_t id) const {
  MetricsSummary m;
  double total_steps = 0;  // planned, from the latest step record
  // The tail is enough: the records that matter are the latest ones.
  std::istringstream lines(read_tail(metrics_path(id), 16 * 1024));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    nlohmann::json rec = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!rec.is_object()) continue;  // a line being written right now
    const std::string event = rec.value("event", "");
    if (event == "done") {
      m.result = rec;
      const double steps = rec.contains("steps") && rec["steps"].is_number() ? rec["steps"].get<double>() : 0.0;
      // A stopped run (a cancel with `save`) ends short of its plan; a finished one at 1.
      if (total_steps > 0 && steps > 0) m.progress = std::min(1.0, steps / total_steps);
      else if (!rec.value("stopped", false)) m.progress = 1.0;
    } else if (event == "step" || event == "epoch") {
      m.last_metrics = rec;
      if (event == "step" && rec.value("total_steps", 0.0) > 0) {
        total_steps = rec.value("total_steps", 0.0);
        m.progress = std::min(1.0, rec.value("step", 0.0) / total_steps);
      }
    }
  }
  return m;
}

std::vector<std::string> JobStore::error_lines(int64_t id, size_t n, bool log_tail) const {
  namespace fs = std::filesystem;
  const std::string log = read_tail(log_path(id), 64 * 1024);
  // Each rank's stderr: ranks/<mpi job>/rank.<N>/stderr (Open MPI's --output-filename layout).
  std::vector<std::pair<int, std::string>> by_rank;
  bool rank_files = false;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(ranks_dir(id), ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    const std::string folder = p.parent_path().filename().string();
    if (it.depth() != 2 || p.filename() != "stderr" || folder.rfind("rank.", 0) != 0) continue;
    char* stop = nullptr;
    const long rank = std::strtol(folder.c_str() + 5, &stop, 10);
    if (stop == folder.c_str() + 5 || *stop != '\0') continue;
    rank_files = true;
    for (std::string& msg : train_error_lines(read_tail(p.string(), 64 * 1024)))
      by_rank.emplace_back(static_cast<int>(rank), std::move(msg));
  }
  std::stable_sort(by_rank.begin(), by_rank.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  if (!rank_files)  // a job launched before ranks/ existed, or by another launcher: the rank is unknown
    for (std::string& msg : train_error_lines(log)) by_rank.emplace_back(-1, std::move(msg));
  std::vector<std::string> out = merge_by_rank(by_rank);
  for (std::string& report : mpirun_rank_reports(log, /*exit_codes=*/out.empty())) out.push_back(std::move(report));
  if (out.empty() && log_tail) {
    std::istringstream lines(log);
    std::string line;
    while (std::getline(lines, line)) out.push_back(line);
    if (out.size() > n) out.erase(out.begin(), out.end() - static_cast<std::ptrdiff_t>(n));
  }
  if (out.size() > n) out.resize(n);  // the first ones: the cause comes before its consequences
  return out;
}

std::string JobStore::status_url(int64_t id) const {
  std::ifstream in(log_path(id));
  std::string line;
  // Printed before training starts: among the log's first lines.
  for (int i = 0; i < 50 && std::getline(in, line); ++i) {
    const auto at = line.rfind("status: http://", 0);
    if (at == 0) return line.substr(8);
  }
  return "";
}

}  // namespace tandem::serve
