// Crash-safe file writes: data goes to a temporary file in the same directory, is fsynced, renamed
// over the target (rename is atomic on POSIX), and the directory is fsynced so the rename survives a
// power cut. A crash at any point leaves either the old file or the new one, never a mix.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace tandem::serialization {

// Writes `data` to a fresh temporary file next to `path` and fsyncs it; returns the temporary path.
std::string write_temp_file(const std::string& path, std::string_view data);
// Renames `temp_path` over `path` and fsyncs the directory holding it.
void commit_temp_file(const std::string& temp_path, const std::string& path);
// write_temp_file + commit_temp_file.
void write_file_atomic(const std::string& path, std::string_view data);

// Whole-file read; IOError naming the path when it cannot be read.
std::string read_file(const std::string& path);

// fsync a directory (after creating, renaming or removing entries in it).
void fsync_directory(const std::string& dir);
// mkdir -p; IOError on failure.
void make_directories(const std::string& dir);
bool path_exists(const std::string& path);
// rm -rf of one path (used to drop old checkpoints and stale temporary directories).
void remove_all(const std::string& path);
// Names of the entries of a directory (no "." or ".."), sorted.
std::vector<std::string> list_directory(const std::string& dir);
std::string parent_directory(const std::string& path);

}  // namespace tandem::serialization
