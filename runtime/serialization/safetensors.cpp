// safetensors writer and validating reader (nlohmann-json for the header).
#include "runtime/serialization/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "runtime/error.h"
#include "runtime/serialization/atomic_file.h"

namespace tandem::serialization {

using nlohmann::json;

namespace {
// The data is copied as raw bytes: the format is little-endian, and so is every host we build for.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors I/O assumes a little-endian host");

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the limit Python's safetensors enforces

[[noreturn]] void corrupt(const std::string& source, const std::string& what) {
  TANDEM_FAIL(IO, "safetensors file '{}' is corrupt or truncated: {}", source, what);
}
}  // namespace

const char* safetensors_dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    case DType::f64: return "F64";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::u8: return "U8";
  }
  TANDEM_FAIL(Internal, "unknown dtype {}", int(t));
}

DType safetensors_dtype_from_name(const std::string& name, const std::string& context) {
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i32, DType::i64, DType::u8})
    if (name == safetensors_dtype_name(t)) return t;
  TANDEM_FAIL(IO, "{}: dtype \"{}\" is not supported (tandem reads F32, F16, BF16, F64, I32, I64, U8)",
              context, name);
}

const Tensor* SafetensorsContents::find(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

std::string safetensors_bytes(const NamedTensors& tensors, const Metadata& metadata) {
  json header = json::object();
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    TANDEM_CHECK(!name.empty() && name != "__metadata__", "safetensors: invalid tensor name \"{}\"", name);
    TANDEM_CHECK(names.insert(name).second, "safetensors: tensor name \"{}\" appears twice", name);
    TANDEM_CHECK(t.defined(), "safetensors: tensor \"{}\" is undefined", name);
    json shape = json::array();
    for (int64_t d : t.shape()) shape.push_back(d);
    uint64_t n = t.nbytes();
    header[name] = {{"dtype", safetensors_dtype_name(t.dtype())}, {"shape", shape},
                    {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  // Pad with spaces so the data starts 8-byte aligned (as Python's writer does).
  text.append((8 - text.size() % 8) % 8, ' ');

  std::string out;
  out.reserve(8 + text.size() + offset);
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += text;
  for (const auto& [name, t] : tensors) {
    Tensor host = t.device().is_cpu() ? t : t.to(kCPU);
    out.append(static_cast<const char*>(host.data_ptr()), host.nbytes());
  }
  return out;
}

void save_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata) {
  write_file_atomic(path, safetensors_bytes(tensors, metadata));
}

SafetensorsContents parse_safetensors(std::string_view bytes, const std::string& source) {
  if (bytes.size() < 8) corrupt(source, fmt::format("{} bytes, shorter than the 8-byte header length", bytes.size()));
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  if (header_len > kMaxHeaderBytes) corrupt(source, fmt::format("header length {} is implausible", header_len));
  if (header_len > bytes.size() - 8)
    corrupt(source, fmt::format("header length {} runs past the end of the {}-byte file", header_len, bytes.size()));
  std::string_view header_text = bytes.substr(8, header_len);
  if (header_text.empty() || header_text.front() != '{')
    corrupt(source, "the header does not start with '{'");
  json header = json::parse(header_text.begin(), header_text.end(), nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) corrupt(source, "the header is not a JSON object");

  const uint64_t data_len = bytes.size() - 8 - header_len;
  const char* data = bytes.data() + 8 + header_len;
  SafetensorsContents out;
  struct Span { uint64_t begin, end; std::string name; };
  std::vector<Span> spans;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& e = it.value();
    if (name == "__metadata__") {
      if (!e.is_object()) corrupt(source, "__metadata__ is not an object");
      for (auto m = e.begin(); m != e.end(); ++m) {
        if (!m.value().is_string()) corrupt(source, fmt::format("__metadata__ value \"{}\" is not a string", m.key()));
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    std::string ctx = fmt::format("safetensors file '{}', entry \"{}\"", source, name);
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
      TANDEM_FAIL(IO, "{}: needs \"dtype\", \"shape\" and \"data_offsets\"", ctx);
    if (!e["dtype"].is_string()) TANDEM_FAIL(IO, "{}: dtype is not a string", ctx);
    DType dtype = safetensors_dtype_from_name(e["dtype"].get<std::string>(), ctx);
    const json& js = e["shape"];
    if (!js.is_array()) TANDEM_FAIL(IO, "{}: shape is not an array", ctx);
    Shape shape;
    uint64_t numel = 1;
    for (const json& d : js) {
      if (!d.is_number_unsigned()) TANDEM_FAIL(IO, "{}: shape {} has a non-integer or negative dim", ctx, js.dump());
      uint64_t v = d.get<uint64_t>();
      if (v != 0 && numel > std::numeric_limits<uint64_t>::max() / 16 / v)
        TANDEM_FAIL(IO, "{}: shape {} is too large", ctx, js.dump());
      numel *= v;
      shape.push_back(static_cast<int64_t>(v));
    }
    const json& jo = e["data_offsets"];
    if (!jo.is_array() || jo.size() != 2 || !jo[0].is_number_unsigned() || !jo[1].is_number_unsigned())
      TANDEM_FAIL(IO, "{}: data_offsets must be two non-negative integers", ctx);
    uint64_t begin = jo[0].get<uint64_t>(), end = jo[1].get<uint64_t>();
    if (begin > end || end > data_len)
      TANDEM_FAIL(IO, "{}: data_offsets [{}, {}] lie outside the {}-byte data section (truncated file?)", ctx,
                  begin, end, data_len);
    uint64_t want = numel * dtype_size(dtype);
    if (end - begin != want)
      TANDEM_FAIL(IO, "{}: {} bytes at data_offsets [{}, {}], but dtype {} x shape {} needs {} bytes", ctx,
                  end - begin, begin, end, safetensors_dtype_name(dtype), shape_str(shape), want);
    Tensor t = Tensor::empty(shape, dtype, kCPU);
    if (want) std::memcpy(t.data_ptr(), data + begin, want);
    out.tensors.emplace_back(name, t);
    spans.push_back({begin, end, name});
  }
  // Entries must tile the data section exactly: no overlap, no holes, nothing trailing.
  std::vector<size_t> order(spans.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return spans[a].begin != spans[b].begin ? spans[a].begin < spans[b].begin : spans[a].end < spans[b].end;
  });
  uint64_t pos = 0;
  for (size_t i : order) {
    if (spans[i].begin < pos)
      corrupt(source, fmt::format("entry \"{}\" at [{}, {}] overlaps the previous entry (ends at {})", spans[i].name,
                                  spans[i].begin, spans[i].end, pos));
    if (spans[i].begin > pos)
      corrupt(source, fmt::format("a hole of {} bytes before entry \"{}\"", spans[i].begin - pos, spans[i].name));
    pos = spans[i].end;
  }
  if (pos != data_len)
    corrupt(source, fmt::format("the entries cover {} bytes but the data section has {}", pos, data_len));
  NamedTensors sorted;
  for (size_t i : order) sorted.push_back(out.tensors[i]);
  out.tensors = std::move(sorted);
  return out;
}

SafetensorsContents load_safetensors(const std::string& path) { return parse_safetensors(read_file(path), path); }

}  // namespace tandem::serialization
