// A Figure as a gnuplot script (data inline as datablocks) and gnuplot run on it as a child process
// (posix_spawnp, no shell): PNG (pngcairo) or SVG by the output's extension.
#pragma once
#include <string>

#include "apps/tandem-plot/plot_data.h"

namespace tandem::plot {

// The script that draws `figure` into `output` (.png or .svg; ValueError otherwise).
std::string gnuplot_script(const Figure& figure, const std::string& output, const std::string& title);

// Writes the script next to the output (OUTPUT.gp, kept for users to edit) and runs `gnuplot` on
// it; IOError when gnuplot is missing or fails (with its exit status).
void run_gnuplot(const std::string& script, const std::string& output);

}  // namespace tandem::plot
