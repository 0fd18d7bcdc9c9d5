// Dataset loading from IDX files.
#include "runtime/data/dataset.h"

#include <sys/stat.h>

#include <cstring>

#include "runtime/data/idx.h"
#include "runtime/error.h"

namespace tandem::data {

namespace {

// Moves the bytes into a Tensor without copying: the Tensor's storage owns the vector.
Tensor to_u8_tensor(std::vector<uint8_t>&& bytes, const Shape& shape) {
  auto owner = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  return Tensor::from_blob(owner->data(), shape, DType::u8, kCPU, owner);
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

Dataset load_idx_dataset(const std::string& images_path, const std::string& labels_path, int64_t num_classes) {
  IdxArray images = read_idx(images_path, kIdxImagesMagic);
  IdxArray labels = read_idx(labels_path, kIdxLabelsMagic);
  if (images.dims[0] != labels.dims[0])
    TANDEM_FAIL(IO, "{} holds {} images but {} holds {} labels; the two files must belong together", images_path,
                images.dims[0], labels_path, labels.dims[0]);
  for (size_t i = 0; i < labels.data.size(); ++i)
    if (labels.data[i] >= num_classes)
      TANDEM_FAIL(IO, "{}: label {} at index {} is outside [0, {})", labels_path, int(labels.data[i]), i, num_classes);
  Dataset ds;
  ds.num_classes = num_classes;
  ds.images = to_u8_tensor(std::move(images.data), images.dims);
  ds.labels = to_u8_tensor(std::move(labels.data), labels.dims);
  return ds;
}

Dataset load_fashion_mnist(const std::string& dir, Split split) {
  std::string prefix = dir + (split == Split::Train ? "/train" : "/t10k");
  auto pick = [](const std::string& base) {
    return file_exists(base + ".gz") || !file_exists(base) ? base + ".gz" : base;
  };
  return load_idx_dataset(pick(prefix + "-images-idx3-ubyte"), pick(prefix + "-labels-idx1-ubyte"), 10);
}

}  // namespace tandem::data
