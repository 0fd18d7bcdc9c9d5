// An in-memory image-classification dataset: uint8 images [N, H, W] and uint8 labels [N], as the
// IDX files hold them (normalisation happens per batch, see loader.h). Fashion-MNIST loading.
#pragma once
#include <cstdint>
#include <string>

#include "runtime/tensor.h"

namespace tandem::data {

// Fashion-MNIST's training-set pixel mean and standard deviation (of x / 255).
inline constexpr double kFashionMnistMean = 0.2860;
inline constexpr double kFashionMnistStd = 0.3530;

struct Dataset {
  Tensor images;  // u8 [N, H, W]
  Tensor labels;  // u8 [N]
  int64_t num_classes = 10;

  int64_t size() const { return images.defined() ? images.size(0) : 0; }
  int64_t height() const { return images.size(1); }
  int64_t width() const { return images.size(2); }
  int64_t pixels() const { return height() * width(); }
};

// Reads an images file (magic 2051) and a labels file (magic 2049); checks that their counts agree
// and that every label is below num_classes.
Dataset load_idx_dataset(const std::string& images_path, const std::string& labels_path, int64_t num_classes = 10);

enum class Split { Train, Test };
// {dir}/train-images-idx3-ubyte.gz and friends ("t10k-" for the test split). Files without the
// ".gz" suffix are used when the gzip ones are absent.
Dataset load_fashion_mnist(const std::string& dir, Split split);

}  // namespace tandem::data
