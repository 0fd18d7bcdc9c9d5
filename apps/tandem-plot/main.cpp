// tandem-plot: charts from tandem-train's metrics files (loss, accuracy, lr, samples/s per step, or
// per epoch without step records; several runs overlaid) and from the benchmarks' JSON lines
// (weak-scaling efficiency vs ranks; all-reduce busbw vs bytes per algorithm), drawn by gnuplot into
// a PNG or SVG.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "apps/tandem-plot/gnuplot.h"
#include "apps/tandem-plot/plot_data.h"
#include "runtime/error.h"

int main(int argc, char** argv) {
  std::vector<std::string> inputs;
  std::string output, title;
  CLI::App app{"tandem-plot: charts of tandem-train metrics (--metrics FILE) and of tandem-bench-scaling / "
               "tandem-bench-allreduce JSON lines, drawn by gnuplot",
               "tandem-plot"};
  app.add_option("files", inputs, "JSON-lines files of one kind (several runs are overlaid)")->required();
  app.add_option("-o,--output", output, "the chart: OUT.png or OUT.svg (the gnuplot script goes to OUT.png.gp)")
      ->required();
  app.add_option("--title", title, "the figure's title (default: the input files' names)");
  CLI11_PARSE(app, argc, argv);
  try {
    const tandem::plot::Figure figure = tandem::plot::read_figure(inputs);
    if (title.empty())
      for (const auto& f : inputs) title += (title.empty() ? "" : ", ") + f.substr(f.find_last_of('/') + 1);
    tandem::plot::run_gnuplot(tandem::plot::gnuplot_script(figure, output, title), output);
    std::printf("tandem-plot: %s\n", output.c_str());
    return 0;
  } catch (const tandem::Error& e) {
    std::fprintf(stderr, "tandem-plot: error: %s\n", e.what());
  }
  return 1;
}
