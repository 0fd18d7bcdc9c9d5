// Reading metrics and benchmark JSON lines into panels.
#include "apps/tandem-plot/plot_data.h"

#include <cstring>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/error.h"

namespace tandem::plot {

namespace {

using nlohmann::json;

std::string base_name(const std::string& path) {
  const auto slash = path.find_last_of('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  for (const char* ext : {".jsonl", ".json"})
    if (name.size() > std::strlen(ext) && name.compare(name.size() - std::strlen(ext), std::string::npos, ext) == 0)
      return name.substr(0, name.size() - std::strlen(ext));
  return name;
}

struct Records {
  std::string path;
  std::vector<json> lines;
};

Records read_lines(const std::string& path) {
  std::ifstream in(path);
  TANDEM_CHECK_KIND(IO, in.good(), "{}: cannot open the file", path);
  Records r{path, {}};
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    TANDEM_CHECK(j.is_object(), "{}:{}: not a JSON object: tandem-plot reads JSON lines (tandem-train --metrics, "
                 "tandem-bench-scaling, tandem-bench-allreduce)", path, n);
    r.lines.push_back(std::move(j));
  }
  TANDEM_CHECK(!r.lines.empty(), "{}: empty: nothing to plot", path);
  return r;
}

Kind kind_of(const Records& r) {
  for (const json& j : r.lines) {
    if (j.contains("event")) return Kind::metrics;
    if (j.value("bench", "") == "scaling") return Kind::scaling;
    if (j.contains("busbw_GBps") && j.contains("algo")) return Kind::allreduce;
  }
  TANDEM_FAIL(Value, "{}: no record tandem-plot knows: expected tandem-train metrics ({{\"event\": \"epoch\", ...}}), "
              "tandem-bench-scaling ({{\"bench\": \"scaling\", ...}}) or tandem-bench-allreduce lines "
              "({{\"algo\": ..., \"busbw_GBps\": ...}})", r.path);
}

double number(const json& j, const char* key) { return j.at(key).get<double>(); }

Figure metrics_figure(const std::vector<Records>& files) {
  Figure f;
  f.kind = Kind::metrics;
  Panel loss{"loss", "epoch", "loss", false, "top right", {}, ""};
  Panel acc{"test accuracy", "epoch", "accuracy", false, "bottom right", {}, "no evaluation in these runs"};
  Panel speed{"throughput", "epoch", "samples/s", false, "bottom right", {}, ""};
  for (const Records& r : files) {
    const std::string name = base_name(r.path);
    Series train{name + " train", {}, {}}, test{name + " test", {}, {}}, a{name, {}, {}}, s{name, {}, {}};
    for (const json& j : r.lines) {
      if (j.value("event", "") != "epoch") continue;
      // A partial epoch (stopped by --max-steps) is a point like any other: its record says epoch 1.
      const double e = number(j, "epoch");
      if (j.contains("train_loss")) train.x.push_back(e), train.y.push_back(number(j, "train_loss"));
      if (j.contains("test_loss")) test.x.push_back(e), test.y.push_back(number(j, "test_loss"));
      if (j.contains("test_acc") && j["test_acc"].is_number()) a.x.push_back(e), a.y.push_back(number(j, "test_acc"));
      if (j.contains("samples_per_s")) s.x.push_back(e), s.y.push_back(number(j, "samples_per_s"));
    }
    TANDEM_CHECK(!train.x.empty(), "{}: metrics without an epoch record: nothing to plot (a run writes one per "
                 "epoch, also for a partial one)", r.path);
    loss.series.push_back(train);
    if (!test.x.empty()) loss.series.push_back(test);
    if (!a.x.empty()) acc.series.push_back(a);
    speed.series.push_back(s);
  }
  f.panels = {loss, acc, speed};
  return f;
}

Figure scaling_figure(const std::vector<Records>& files) {
  Figure f;
  f.kind = Kind::scaling;
  Panel eff{"weak scaling", "ranks", "efficiency", false, "top right", {}, ""};
  Panel hidden{"all-reduce hidden under backward", "ranks", "hidden fraction", false, "top right", {}, ""};
  std::map<std::string, Series> by_model, hid;
  for (const Records& r : files)
    for (const json& j : r.lines) {
      if (j.value("bench", "") != "scaling") continue;
      const std::string key = fmt::format("{} ({})", j.value("model", "?"), base_name(r.path));
      by_model[key].title = key;
      by_model[key].x.push_back(number(j, "world_size"));
      by_model[key].y.push_back(number(j, "efficiency_side_by_side"));
      if (j.contains("hidden_fraction")) {
        hid[key].title = key;
        hid[key].x.push_back(number(j, "world_size"));
        hid[key].y.push_back(number(j, "hidden_fraction"));
      }
    }
  for (auto& [k, s] : by_model) eff.series.push_back(s);
  for (auto& [k, s] : hid) hidden.series.push_back(s);
  f.panels = {eff, hidden};
  return f;
}

Figure allreduce_figure(const std::vector<Records>& files) {
  Figure f;
  f.kind = Kind::allreduce;
  Panel bw{"all-reduce bus bandwidth", "bytes", "busbw (GB/s)", true, "top left", {}, ""};
  std::map<std::string, Series> by_algo;
  for (const Records& r : files)
    for (const json& j : r.lines) {
      if (!j.contains("busbw_GBps")) continue;
      const std::string key = fmt::format("{}, {} ranks", j.value("algo", "?"), j.value("ranks", 0));
      by_algo[key].title = key;
      by_algo[key].x.push_back(number(j, "bytes"));
      by_algo[key].y.push_back(number(j, "busbw_GBps"));
    }
  for (auto& [k, s] : by_algo) bw.series.push_back(s);
  f.panels = {bw};
  return f;
}

}  // namespace

Figure read_figure(const std::vector<std::string>& paths) {
  TANDEM_CHECK(!paths.empty(), "tandem-plot: no input file given");
  std::vector<Records> files;
  for (const auto& p : paths) files.push_back(read_lines(p));
  const Kind kind = kind_of(files.front());
  for (const Records& r : files)
    TANDEM_CHECK(kind_of(r) == kind, "{}: holds another kind of records than {}: plot metrics and each benchmark's "
                 "lines separately", r.path, files.front().path);
  try {
    if (kind == Kind::metrics) return metrics_figure(files);
    if (kind == Kind::scaling) return scaling_figure(files);
    return allreduce_figure(files);
  } catch (const json::exception& e) {
    TANDEM_FAIL(Value, "a record lacks a field or has one of the wrong type: {}", e.what());
  }
}

}  // namespace tandem::plot
