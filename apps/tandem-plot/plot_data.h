// tandem-plot's inputs: JSON-lines files read into named series, by kind: a run's metrics
// (tandem-train --metrics: epoch records, step records with --metrics-every), bench/scaling's lines
// (weak-scaling efficiency per world size) or bench/allreduce's lines (busbw per message size and
// algorithm).
#pragma once
#include <string>
#include <vector>

namespace tandem::plot {

enum class Kind { metrics, scaling, allreduce };

struct Series {
  std::string title;
  std::vector<double> x, y;
  int colour = 0;       // the run's (or model's, algorithm's) index: the same colour in every panel
  bool dashed = false;  // a run's second series in one panel (test loss beside train loss)
};

// One chart: its series (several runs overlaid, or one per algorithm or model).
struct Panel {
  std::string title, xlabel, ylabel;
  bool log_x = false;
  std::string key = "bottom right";  // where the legend goes
  std::vector<Series> series;
  std::string note;  // shown when no series has a point (e.g. a run without evaluation)
};

struct Figure {
  Kind kind = Kind::metrics;
  std::vector<Panel> panels;
};

// Reads every file (all of one kind, told by its records); throws tandem ValueError/IOError naming
// FILE:LINE for a missing file, a line that is not a JSON object, or a file with nothing to plot.
Figure read_figure(const std::vector<std::string>& paths);

}  // namespace tandem::plot
