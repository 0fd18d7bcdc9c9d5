// The layers a `sequential` run config may name, each with its arguments under PyTorch's names
// (linear: in_features, out_features, bias; conv2d: in_channels, out_channels, kernel_size, stride,
// padding, bias; ...): the one table that the parser (errors at the file's line) and build_model
// (errors naming the layer) check a LayerConfig against, and that builds the nn/layers module.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "nn/config/run_config.h"

namespace tandem::nn::config {

// Reports a bad layer: `arg` is the argument at fault ("" for the layer's type), `what` says what is
// wrong and what to write instead. It must throw; check_layer throws a ValueError if it returns.
using LayerFail = std::function<void(const std::string& arg, const std::string& what)>;

// The canonical (lower-case) type for a spelling ("BatchNorm2d" -> "batchnorm2d"); nullopt if no
// such layer.
std::optional<std::string> canonical_layer_type(const std::string& type);
// "linear, conv2d, ...": for messages.
std::string layer_type_list();
// An argument written as a word (gelu's approximate: none | tanh) as the number LayerConfig holds.
// Calls `fail` (saying what the argument takes) for an unknown type or argument, an argument that
// takes no words, or a word not among its words.
double layer_arg_word(const std::string& type, const std::string& arg, const std::string& word,
                      const LayerFail& fail);

// Checks the type, that every argument is known to the layer, has one value (or, for a square
// kernel, a list of equal values; layernorm's normalized_shape: a list), is an integer where the
// layer takes one and lies in range, and that the required ones are given. Calls `fail` otherwise.
void check_layer(const LayerConfig& layer, const LayerFail& fail);
// The module of a layer that passed check_layer; parameters drawn from gen (Dropout: see build_model).
std::shared_ptr<Module> make_layer(const LayerConfig& layer, Generator& gen);

// The table above as docs/embedding.md prints it (Markdown: one row per argument with what it takes
// and its default, a row of its own for a layer without arguments), so the docs cannot drift from the
// code: tests/config's RunConfigDocs compares the two, and TANDEM_UPDATE_DOCS=1 rewrites the doc's copy.
std::string layer_table_markdown();

}  // namespace tandem::nn::config
