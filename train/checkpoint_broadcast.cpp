// load_checkpoint_from_rank0: the checkpoint's files read on rank 0 and broadcast as bytes.
#include "train/checkpoint_broadcast.h"

#include <cstring>
#include <vector>

#include "runtime/error.h"

namespace tandem::train {

namespace {

// Broadcasts i64 values from rank 0, in the communicator's memory (NCCL reduces device memory only).
void broadcast_i64(std::vector<int64_t>& v, comm::Communicator& comm) {
  Tensor t = Tensor::from_vector(v, {static_cast<int64_t>(v.size())}, DType::i64, comm.device());
  comm.broadcast(t, 0)->wait();
  v = t.to_vector<int64_t>();
}

// Broadcasts `bytes` (its size already agreed) as i32 words: collectives take no u8.
void broadcast_bytes(std::string& bytes, comm::Communicator& comm) {
  std::vector<int32_t> words((bytes.size() + 3) / 4, 0);
  std::memcpy(words.data(), bytes.data(), bytes.size());
  Tensor t = Tensor::from_vector(words, {static_cast<int64_t>(words.size())}, DType::i32, comm.device());
  comm.broadcast(t, 0)->wait();
  words = t.to_vector<int32_t>();
  std::memcpy(bytes.data(), words.data(), bytes.size());
}

}  // namespace

serialization::LoadedCheckpoint load_checkpoint_from_rank0(const std::string& path, comm::Communicator* comm) {
  if (comm == nullptr || comm->size() == 1) return serialization::load_checkpoint(path);
  serialization::CheckpointFiles files;
  std::string error;
  if (comm->rank() == 0) {
    try {
      files = serialization::read_checkpoint_files(path);
    } catch (const IOError& e) {
      error = e.what();
    }
  }
  // ok flag, then the sizes of the directory name and the three files.
  std::vector<int64_t> head{error.empty() ? 1 : 0, static_cast<int64_t>(files.path.size()),
                            static_cast<int64_t>(files.state_json.size()), static_cast<int64_t>(files.model.size()),
                            static_cast<int64_t>(files.state.size())};
  broadcast_i64(head, *comm);
  if (head[0] == 0) {
    if (comm->rank() == 0) throw IOError(error);
    TANDEM_FAIL(IO, "--resume '{}': rank 0 cannot read the checkpoint (its error says why); the other ranks "
                "receive it from rank 0", path);
  }
  std::string* parts[] = {&files.path, &files.state_json, &files.model, &files.state};
  for (int i = 0; i < 4; ++i) {
    parts[i]->resize(static_cast<size_t>(head[static_cast<size_t>(i) + 1]));
    broadcast_bytes(*parts[i], *comm);
  }
  return serialization::parse_checkpoint(files);
}

}  // namespace tandem::train
