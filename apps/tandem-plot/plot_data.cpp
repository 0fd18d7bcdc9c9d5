// Reading metrics and benchmark JSON lines into panels.
#include "apps/tandem-plot/plot_data.h"

#include <algorithm>
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

// Appends (x, j[key]) when the record holds a number there (a diverged loss is written as null).
void add_point(Series& s, double x, const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return;
  s.x.push_back(x);
  s.y.push_back(it->get<double>());
}

bool is_step_record(const json& j) { return j.value("event", "") == "step"; }

bool has_step_records(const Records& r) { return std::any_of(r.lines.begin(), r.lines.end(), is_step_record); }

// Per step when any run has step records (--metrics-every N), per epoch otherwise. Per step, a run's
// epoch records (test loss and accuracy; everything for a run without step records) sit at the step
// the epoch ended on (their "steps"). A partial epoch (stopped by --max-steps) is a point like any
// other: its record says epoch 1.
Figure metrics_figure(const std::vector<Records>& files) {
  const bool per_step = std::any_of(files.begin(), files.end(), has_step_records);
  const std::string x_label = per_step ? "step" : "epoch";
  Figure f;
  f.kind = Kind::metrics;
  Panel loss{"loss", x_label, "loss", false, "top right", {}, ""};
  Panel acc{"test accuracy", x_label, "accuracy", false, "bottom right", {}, "no evaluation in these runs"};
  Panel lr{"learning rate", x_label, "lr", false, "top right", {}, ""};
  Panel speed{"throughput", x_label, "samples/s", false, "bottom right", {}, ""};
  for (size_t run = 0; run < files.size(); ++run) {
    const Records& r = files[run];
    const std::string name = base_name(r.path);
    const int colour = static_cast<int>(run);
    Series train{name + " train", {}, {}, colour}, test{name + " test", {}, {}, colour, true};
    Series a{name, {}, {}, colour}, l{name, {}, {}, colour}, s{name, {}, {}, colour};
    const bool steps = has_step_records(r);
    for (const json& j : r.lines) {
      if (is_step_record(j)) {
        const double x = number(j, "step");
        add_point(train, x, j, "loss");
        add_point(l, x, j, "lr");
        add_point(s, x, j, "samples_per_s");
      } else if (j.value("event", "") == "epoch") {
        const double x = number(j, per_step ? "steps" : "epoch");
        if (!steps) {
          add_point(train, x, j, "train_loss");
          add_point(l, x, j, "lr");
          add_point(s, x, j, "samples_per_s");
        }
        add_point(test, x, j, "test_loss");
        add_point(a, x, j, "test_acc");
      }
    }
    TANDEM_CHECK(!train.x.empty(), "{}: metrics without a step or epoch record with a loss: nothing to plot (a run "
                 "writes an epoch record per epoch, also for a partial one, and with --metrics-every N a step "
                 "record every N steps)", r.path);
    const auto keep = [](Panel& panel, const Series& series) {
      if (!series.x.empty()) panel.series.push_back(series);
    };
    keep(loss, train);
    keep(loss, test);
    keep(acc, a);
    keep(lr, l);
    keep(speed, s);
  }
  f.panels = {loss, acc, lr, speed};
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
  int colour = 0;
  for (auto& [k, s] : by_model) {
    s.colour = colour++;
    eff.series.push_back(s);
    if (auto h = hid.find(k); h != hid.end()) h->second.colour = s.colour;
  }
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
  int colour = 0;
  for (auto& [k, s] : by_algo) {
    s.colour = colour++;
    bw.series.push_back(s);
  }
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
