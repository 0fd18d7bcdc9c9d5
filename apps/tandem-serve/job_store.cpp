// The state directory: job records, exit records, and summaries of a job's metrics and log.
#include "apps/tandem-serve/job_store.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>

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
      m.progress = 1.0;
    } else if (event == "step" || event == "epoch") {
      m.last_metrics = rec;
      if (event == "step" && rec.value("total_steps", 0) > 0)
        m.progress = std::min(1.0, rec.value("step", 0.0) / rec.value("total_steps", 1.0));
    }
  }
  return m;
}

std::vector<std::string> JobStore::error_lines(int64_t id, size_t n, bool all_tail) const {
  std::istringstream lines(read_tail(log_path(id), 64 * 1024));
  std::vector<std::string> out;
  std::string line;
  while (std::getline(lines, line)) {
    std::string lower = line;
    // Log lines may hold any bytes (a GPT's sample): tolower takes them as unsigned char.
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (all_tail || lower.find("error") != std::string::npos || lower.find("abort") != std::string::npos)
      out.push_back(line);
  }
  if (out.size() > n) out.erase(out.begin(), out.end() - static_cast<std::ptrdiff_t>(n));
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
