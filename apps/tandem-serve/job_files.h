// The files the server keeps in a job's folder (job_store.h's layout), beside the job's `save`.
#pragma once
#include <string>

namespace tandem::serve {

inline constexpr const char* kJobRecordFile = "job.json";
inline constexpr const char* kJobMetricsFile = "metrics.jsonl";
inline constexpr const char* kJobLogFile = "log.txt";
inline constexpr const char* kJobExitFile = "exit.json";
// Each rank's stdout and stderr (mpirun --output-filename): ranks/<mpi job>/rank.<N>/stderr.
inline constexpr const char* kJobRanksDir = "ranks";
// --launcher slurm: the batch script sbatch was given (slurm.h).
inline constexpr const char* kJobBatchScript = "batch.sh";
inline constexpr const char* kJobFiles[] = {kJobRecordFile, kJobMetricsFile, kJobLogFile, kJobExitFile, kJobRanksDir,
                                            kJobBatchScript};

// Whether a path relative to a job's folder (a `save`) starts with one of those files or one of
// their temporaries ("<file>.tmp.*", atomic_file.h): a checkpoint folder there would break the
// job's records (a done job read back as lost).
inline bool is_job_file(const std::string& relative) {
  const std::string first = relative.substr(0, relative.find('/'));
  for (const std::string file : kJobFiles)
    if (first == file || first.rfind(file + ".tmp.", 0) == 0) return true;
  return false;
}

}  // namespace tandem::serve
