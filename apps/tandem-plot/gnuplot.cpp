// The gnuplot script: one multiplot row of panels, lines with points, the series' data inline.
#include "apps/tandem-plot/gnuplot.h"

#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

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
  s += "set grid\nset key font ',8'\nset style data linespoints\n";
  s += fmt::format("set multiplot layout 1,{} title {}\n", panels, quoted(title));
  for (int p = 0; p < panels; ++p) {
    const Panel& panel = figure.panels[p];
    s += fmt::format("set title {}\nset xlabel {}\nset ylabel {}\n", quoted(panel.title), quoted(panel.xlabel),
                     quoted(panel.ylabel));
    s += panel.log_x ? "set logscale x 2\nset format x '%.0b%BB'\nset xtics autofreq\n"
                     : "unset logscale x\nset format x '%g'\nset xtics 1\n";  // epochs, ranks: whole numbers
    s += "set offsets graph 0.05, graph 0.05, graph 0.05, graph 0.05\n";
    s += fmt::format("set key {}\n", panel.key);
    if (panel.series.empty()) {
      // An empty panel: its note in the middle of an empty frame.
      s += fmt::format("set label 1 {} at graph 0.5, graph 0.5 center\nset xrange [0:1]\nset yrange [0:1]\n"
                       "plot NaN notitle\nunset label 1\nset autoscale\n",
                       quoted(panel.note.empty() ? "no data" : panel.note));
      continue;
    }
    std::string plot = "plot ";
    for (size_t k = 0; k < panel.series.size(); ++k)
      plot += fmt::format("{}$p{}s{} using 1:2 title {} pt 7 ps 0.6 lw 1.5", k ? ", " : "", p, k,
                          quoted(panel.series[k].title));
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
