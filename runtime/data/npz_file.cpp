// NumPy's .npz (a zip of .npy members, np.savez / np.savez_compressed) read with libzip: a stored
// member is read in place, each row by a seek and a read; a deflated one cannot be sought in, so it
// is inflated into memory once, on first use.
#include <zip.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "runtime/data/array_file_readers.h"
#include "runtime/error.h"

namespace tandem::data {
namespace {

// The bytes read of the start of each member: a .npy header is at most this long in practice
// (NumPy pads it to 64 bytes; a version-2 header of many dimensions is still well under it).
constexpr size_t kHeaderBytes = 4096;

class NpzFile final : public ArrayFile {
 public:
  explicit NpzFile(const std::string& path) : ArrayFile(path) {
    int code = 0;
    zip_ = zip_open(path.c_str(), ZIP_RDONLY, &code);
    if (zip_ == nullptr) {
      zip_error_t error;
      zip_error_init_with_code(&error, code);
      const std::string why = zip_error_strerror(&error);
      zip_error_fini(&error);
      TANDEM_FAIL(IO, "{}: cannot read as an .npz (zip) file: {}", path, why);
    }
    try {
      index_members();
    } catch (...) {
      zip_discard(zip_);
      throw;
    }
  }
  ~NpzFile() override {
    for (Member& m : members_)
      if (m.file != nullptr) zip_fclose(m.file);
    zip_discard(zip_);
  }
  NpzFile(const NpzFile&) = delete;
  NpzFile& operator=(const NpzFile&) = delete;

  Tensor read_rows(const std::string& name, const std::vector<int64_t>& rows) const override {
    const ArrayInfo& info = array(name);
    check_rows(info, rows);
    Member& m = members_[static_cast<size_t>(&info - arrays().data())];
    std::lock_guard<std::mutex> lock(mutex_);  // libzip's handles are not thread-safe
    if (!m.stored && m.inflated.empty()) inflate(m, info);
    return gather_rows(info, rows, [&](int64_t row, size_t row_bytes, uint8_t* out) {
      const size_t at = m.header.data_offset + static_cast<size_t>(row) * row_bytes;
      if (!m.stored) {
        std::memcpy(out, m.inflated.data() + at, row_bytes);
        return;
      }
      if (m.file == nullptr) m.file = open_member(m, info);
      const bool ok = zip_fseek(m.file, static_cast<zip_int64_t>(at), SEEK_SET) == 0 &&
                      zip_fread(m.file, out, row_bytes) == static_cast<zip_int64_t>(row_bytes);
      TANDEM_CHECK_KIND(IO, ok, "{}: reading row {} of '{}' failed: {}", path(), row, info.name,
                        zip_strerror(zip_));
    });
  }

 private:
  struct Member {
    zip_uint64_t index = 0;
    bool stored = true;
    NpyHeader header;
    zip_file_t* file = nullptr;     // a stored member's open handle, for seeks
    std::vector<uint8_t> inflated;  // a deflated member's bytes, once read
  };

  // Every "NAME.npy" member as array NAME, from its header.
  void index_members() {
    const zip_int64_t n = zip_get_num_entries(zip_, 0);
    for (zip_int64_t i = 0; i < n; ++i) {
      zip_stat_t st;
      TANDEM_CHECK_KIND(IO, zip_stat_index(zip_, static_cast<zip_uint64_t>(i), 0, &st) == 0, "{}: member {}: {}", path(),
                        i, zip_strerror(zip_));
      const std::string member = st.name != nullptr ? st.name : "";
      if (member.size() <= 4 || member.compare(member.size() - 4, 4, ".npy") != 0) continue;  // not an array
      TANDEM_CHECK_KIND(IO, (st.valid & ZIP_STAT_SIZE) && (st.valid & ZIP_STAT_COMP_METHOD), "{}: member {} has no size",
                        path(), member);
      Member m;
      m.index = static_cast<zip_uint64_t>(i);
      m.stored = st.comp_method == ZIP_CM_STORE;
      const std::string source = path() + ":" + member;
      std::vector<uint8_t> head(static_cast<size_t>(std::min<zip_uint64_t>(st.size, kHeaderBytes)));
      zip_file_t* f = zip_fopen_index(zip_, m.index, 0);
      TANDEM_CHECK_KIND(IO, f != nullptr, "{}: cannot open: {}", source, zip_strerror(zip_));
      const zip_int64_t got = zip_fread(f, head.data(), head.size());
      zip_fclose(f);
      TANDEM_CHECK_KIND(IO, got == static_cast<zip_int64_t>(head.size()), "{}: truncated or corrupt member", source);
      ArrayInfo info{member.substr(0, member.size() - 4), DType::f32, {}, {}};
      try {
        m.header = parse_npy_header(head.data(), head.size(), source, static_cast<size_t>(st.size));
        info.dtype = m.header.dtype;
        info.shape = m.header.shape;
      } catch (const ValueError& e) {  // a dtype or order tandem does not read: the other arrays still can
        info.unsupported = e.what();
      }
      add_array(std::move(info));
      members_.push_back(std::move(m));
    }
  }

  zip_file_t* open_member(const Member& m, const ArrayInfo& info) const {
    zip_file_t* f = zip_fopen_index(zip_, m.index, 0);
    TANDEM_CHECK_KIND(IO, f != nullptr, "{}: cannot open '{}': {}", path(), info.name, zip_strerror(zip_));
    return f;
  }

  // The member's bytes, grown as they arrive (a hostile size claim allocates nothing up front).
  void inflate(Member& m, const ArrayInfo& info) const {
    zip_file_t* f = open_member(m, info);
    const size_t want = m.header.data_offset + m.header.data_bytes();
    std::vector<uint8_t> bytes;
    while (bytes.size() < want) {
      const size_t chunk = std::min<size_t>(want - bytes.size(), size_t{1} << 24);
      const size_t old = bytes.size();
      bytes.resize(old + chunk);
      const zip_int64_t got = zip_fread(f, bytes.data() + old, chunk);
      if (got != static_cast<zip_int64_t>(chunk)) {
        zip_fclose(f);
        TANDEM_FAIL(IO, "{}: array '{}' is truncated or corrupt (inflating it failed)", path(), info.name);
      }
    }
    zip_fclose(f);
    m.inflated = std::move(bytes);
  }

  zip_t* zip_ = nullptr;
  mutable std::vector<Member> members_;  // parallel to arrays()
  mutable std::mutex mutex_;
};

}  // namespace

std::shared_ptr<ArrayFile> open_npz_file(const std::string& path) { return std::make_shared<NpzFile>(path); }

}  // namespace tandem::data
