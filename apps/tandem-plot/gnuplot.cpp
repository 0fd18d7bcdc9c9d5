// The gnuplot script: one multiplot row of panels, lines with points, the series' data inline; one
// colour per run in every panel, and no axis left for gnuplot to widen (its "empty range" warnings).
#include "apps/tandem-plot/gnuplot.h"

#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include <fmt/format.h>

#include "runtime/error.h"

extern char** environ;

namespace tandem::plot {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A string in gnuplot's double quotes.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// One colour per run (Series::colour), the same in every panel; cycles past eight runs.
const char* colour_of(int index) {
  static const char* const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                        "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  return palette[index % 8];
}

struct Range {
  double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
};

// gnuplot's range for an axis whose data are all one value (one point: a short run's single epoch,
// or a constant learning rate), which gnuplot would widen itself with an "empty range" warning;
// empty when the data span a range (autoscale, with the panel's offsets).
std::string fixed_range(const Range& r, bool log_scale, bool whole) {
  if (r.lo != r.hi) return "";
  const double v = r.lo;
  if (log_scale) return fmt::format("[{:.9g}:{:.9g}]", v / 2, v * 2);
  const double half = whole || v == 0 ? 1.0 : std::abs(v) * 0.05;  // whole numbers: the neighbours
  return fmt::format("[{:.9g}:{:.9g}]", v - half, v + half);
}

}  // namespace

std::string gnuplot_script(const Figure& figure, const std::string& output, const std::string& title) {
  const int panels = static_cast<int>(figure.panels.size());
  const int width = std::max(420 * panels, 600), height = 340;
  std::string terminal;
  if (ends_with(output, ".png"))
    terminal = fmt::format("set terminal pngcairo noenhanced size {},{} font 'Sans,9'", width, height);
  else if (ends_with(output, ".svg"))
    terminal = fmt::format("set terminal svg noenhanced size {},{} font 'Sans,10' background '#ffffff'", width, height);
  else
    TANDEM_FAIL(Value, "-o {}: the output must end in .png or .svg", output);

  std::string s = terminal + "\n";
  s += fmt::format("set output {}\n", quoted(output));
  // The data first, as datablocks: $p<panel>s<series>.
  for (int p = 0; p < panels; ++p)
    for (size_t k = 0; k < figure.panels[p].series.size(); ++k) {
      const Series& ser = figure.panels[p].series[k];
      s += fmt::format("$p{}s{} << EOD\n", p, k);
      for (size_t i = 0; i < ser.x.size(); ++i) s += fmt::format("{:.9g} {:.9g}\n", ser.x[i], ser.y[i]);
      s += "EOD\n";
    }
  s += "set grid\nset key font ',8'\n";
  s += fmt::format("set multiplot layout 1,{} title {}\n", panels, quoted(title));
  for (int p = 0; p < panels; ++p) {
    const Panel& panel = figure.panels[p];
    s += fmt::format("set title {}\nset xlabel {}\nset ylabel {}\n", quoted(panel.title), quoted(panel.xlabel),
                     quoted(panel.ylabel));
    s += "set autoscale\nset offsets graph 0.05, graph 0.05, graph 0.05, graph 0.05\n";
    s += fmt::format("set key {}\n", panel.key);
    if (panel.series.empty()) {
      // An empty panel: its note in the middle of an empty frame.
      s += fmt::format("unset logscale x\nset format x '%g'\nset xtics autofreq\nset label 1 {} at graph 0.5, graph 0.5 center\n"
                       "set xrange [0:1]\nset yrange [0:1]\nplot NaN notitle\nunset label 1\n",
                       quoted(panel.note.empty() ? "no data" : panel.note));
      continue;
    }
    Range x, y;
    for (const Series& ser : panel.series) {
      for (double v : ser.x) x.add(v);
      for (double v : ser.y) y.add(v);
    }
    if (panel.log_x)
      s += "set logscale x 2\nset format x '%.0b%BB'\nset xtics autofreq\n";
    else  // epochs, steps, ranks: whole numbers, every one while there are few
      s += fmt::format("unset logscale x\nset format x '%g'\nset xtics {}\n",
                       x.hi - x.lo <= 10 ? "1" : "autofreq");
    if (const std::string r = fixed_range(x, panel.log_x, !panel.log_x); !r.empty()) s += "set xrange " + r + "\n";
    if (const std::string r = fixed_range(y, false, false); !r.empty()) s += "set yrange " + r + "\n";
    std::string plot = "plot ";
    for (size_t k = 0; k < panel.series.size(); ++k) {
      const Series& ser = panel.series[k];
      // Points while they can be told apart; a long run (hundreds of step records) as a line.
      const std::string marks = ser.x.size() <= 60 ? fmt::format("with linespoints pt {} ps 0.6", ser.dashed ? 6 : 7)
                                                    : "with lines";
      plot += fmt::format("{}$p{}s{} using 1:2 title {} {} lw 1.5 lc rgb '{}' dt {}", k ? ", " : "", p, k,
                          quoted(ser.title), marks, colour_of(ser.colour), ser.dashed ? 2 : 1);
    }
    s += plot + "\n";
  }
  s += "unset multiplot\nset output\n";
  return s;
}

void run_gnuplot(const std::string& script, const std::string& output) {
  const std::string path = output + ".gp";
  {
    std::ofstream out(path, std::ios::trunc);
    out << script;
    TANDEM_CHECK_KIND(IO, out.good(), "{}: cannot write the gnuplot script", path);
  }
  std::string prog = "gnuplot";
  std::vector<char*> argv{prog.data(), const_cast<char*>(path.c_str()), nullptr};
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, "gnuplot", nullptr, nullptr, argv.data(), environ);
  TANDEM_CHECK_KIND(IO, rc == 0, "cannot run gnuplot ({}): install it (Debian: apt-get install gnuplot-nox)",
                    std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  TANDEM_CHECK_KIND(IO, WIFEXITED(status) && WEXITSTATUS(status) == 0,
                    "gnuplot failed on {} (exit status {}); its messages are above", path,
                    WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

}  // namespace tandem::plot
