#include "runtime/spelling.h"

#include <algorithm>

namespace tandem {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);  // one row of the table: the distances of a[:i] to b[:j]
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string closest_spelling(const std::string& word, const std::vector<std::string>& candidates, size_t max_edits) {
  std::string best;
  size_t best_d = max_edits + 1;
  for (const std::string& c : candidates)
    if (const size_t d = edit_distance(word, c); d < best_d) best_d = d, best = c;
  return best;
}

std::string or_list(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i)
    out += (i == 0 ? "" : i + 1 == words.size() ? " or " : ", ") + words[i];
  return out;
}

}  // namespace tandem
