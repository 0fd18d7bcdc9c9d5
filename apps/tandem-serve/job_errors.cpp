// Error lines of a job's ranks and of mpirun (see job_errors.h).
#include "apps/tandem-serve/job_errors.h"

#include <algorithm>
#include <map>
#include <regex>
#include <sstream>

#include <fmt/format.h>

namespace tandem::serve {

namespace {

constexpr const char* kTrain = "tandem-train: ";
constexpr const char* kRunTimeErrors[] = {"tandem-train: error: ", "tandem-train: unexpected error: "};
constexpr const char* kHelpHint = "Run with --help for more information.";

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

void add_once(std::vector<std::string>& out, std::string s) {
  if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(std::move(s));
}

// "0-3, 5, 7-8" of sorted distinct ranks.
std::string rank_ranges(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += j > i + 1 ? fmt::format("{}-{}", ranks[i], ranks[j])
                     : j == i + 1 ? fmt::format("{}, {}", ranks[i], ranks[j]) : std::to_string(ranks[i]);
    i = j + 1;
  }
  return out;
}

}  // namespace

std::vector<std::string> train_error_lines(const std::string& text) {
  const std::vector<std::string> lines = split_lines(text);
  std::vector<std::string> out;
  auto line_at = [&](size_t i) { return i < lines.size() ? lines[i] : std::string(); };
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    bool found = false;
    for (const char* marker : kRunTimeErrors) {
      if (auto at = line.find(marker); at != std::string::npos) {
        add_once(out, line.substr(at));
        found = true;
        break;
      }
    }
    if (found || !starts_with(line, kTrain)) continue;
    // A command-line error: CLI11's message, then a pointer to --help (or, from an older
    // tandem-train, a blank line and the whole usage, whose own first line is the description).
    const bool hint = line_at(i + 1) == kHelpHint;
    const bool usage = line_at(i + 1).empty() &&
                       (starts_with(line_at(i + 2), "Usage: ") || starts_with(line_at(i + 3), "Usage: "));
    if (hint || usage) add_once(out, line);
  }
  return out;
}

std::vector<std::string> mpirun_rank_reports(const std::string& log, bool exit_codes) {
  // Open MPI 4: "mpirun noticed that process rank 1 with PID 4242 on node n1 exited on signal 9 (Killed)."
  static const std::regex signal_re(R"(process rank (\d+) with PID (\d+) on node \S+ exited on signal (\d+)(?: \(([^)]*)\))?)");
  // Open MPI 4: "The first process to do so was:", "Process name: [[727,1],0]", "Exit code:    2".
  static const std::regex process_re(R"(Process name: \[\[\d+,\d+\],(\d+)\])");
  static const std::regex code_re(R"(Exit code:\s*(\d+))");
  const std::vector<std::string> lines = split_lines(log);
  std::vector<std::string> out;
  std::smatch m;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (line.find("exited on signal") != std::string::npos && std::regex_search(line, m, signal_re)) {
      // Not its PID: Open MPI 4 often reports 0 there.
      add_once(out, fmt::format("rank {} was killed by signal {}{}", m[1].str(), m[3].str(),
                                m[4].matched ? " (" + m[4].str() + ")" : ""));
    } else if (exit_codes && line.find("Process name: [[") != std::string::npos &&
               std::regex_search(line, m, process_re)) {
      const std::string rank = m[1].str();
      if (i + 1 < lines.size() && std::regex_search(lines[i + 1], m, code_re))
        add_once(out, fmt::format("rank {} exited with code {}", rank, m[1].str()));
    }
  }
  return out;
}

std::vector<std::string> merge_by_rank(const std::vector<std::pair<int, std::string>>& messages) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<int>> ranks;
  for (const auto& [rank, msg] : messages) {
    auto [it, fresh] = ranks.try_emplace(msg);
    if (fresh) order.push_back(msg);
    if (std::find(it->second.begin(), it->second.end(), rank) == it->second.end()) it->second.push_back(rank);
  }
  std::vector<std::string> out;
  for (const std::string& msg : order) {
    std::vector<int> rs = ranks[msg];
    rs.erase(std::remove(rs.begin(), rs.end(), -1), rs.end());
    std::sort(rs.begin(), rs.end());
    if (rs.empty()) out.push_back(msg);
    else out.push_back(fmt::format("{} {}: {}", rs.size() == 1 ? "rank" : "ranks", rank_ranges(rs), msg));
  }
  return out;
}

}  // namespace tandem::serve
