// "Did you mean ...?": the known word closest to a misspelt one, for the messages of flags and
// configuration keys. Internal: not installed.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace tandem {

// Levenshtein distance: insertions, deletions and substitutions of one character each.
size_t edit_distance(const std::string& a, const std::string& b);

// The candidate at most max_edits away from word (the first of the closest); empty when none is: a
// typo, not a different word.
std::string closest_spelling(const std::string& word, const std::vector<std::string>& candidates,
                             size_t max_edits = 2);

// "a, b or c": words listed for a message ("expected mlp, cnn or gpt").
std::string or_list(const std::vector<std::string>& words);

}  // namespace tandem
