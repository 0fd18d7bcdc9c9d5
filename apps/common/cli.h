// The command line of the training apps (CLI11): flags for every TrainConfig field, and parsing
// that prints usage and returns exit code 2 on a bad flag.
#pragma once
#include "apps/common/engine.h"
#include <optional>

#include <CLI/CLI.hpp>

#include "train/train_config.h"

namespace tandem::app {

// Registers the flags of `cfg` on `app` (cfg must outlive the parse).
void add_train_flags(CLI::App& app, TrainConfig& cfg);

// Parses argv. Returns an exit code when the program should stop now: 0 after --help, 2 after a
// bad flag (the error, a "did you mean" for a misspelt flag, and a pointer to --help go to stderr, one
// line each); nullopt to go on.
std::optional<int> parse_cli(CLI::App& app, int argc, char** argv);

}  // namespace tandem::app
