// The names of the files a process writes into a run's output directory, built in
// one place for every writer and reader (trainer, shards, summaries, reports):
//
//   single process     metrics.jsonl          trace.json
//   rank / worker R    metrics.rank<R>.jsonl  trace.rank<R>.json
//   shard S            metrics.shard<S>.jsonl trace.shard<S>.json
//   checkpoint         checkpoint.bin (kCheckpointFile, trainer.h)
//
// Metrics of a resumed run are appended to the same file. Traces are never appended
// or overwritten (as torch.profiler's trace handler, which writes a new file per
// trace): the first run writes the names above, a resumed run the first free one of
// trace.rank<R>.run2.json, trace.rank<R>.run3.json, ... (TraceFileForNewRun).
#ifndef RINGSIDE_COMMON_OUTPUT_FILES_H_
#define RINGSIDE_COMMON_OUTPUT_FILES_H_

#include <string>

namespace ringside {

enum class OutputFile { kMetrics, kTrace };

// Who writes a file: the only process of a single run, rank (or PS worker) `index`
// of a distributed job, or parameter-server shard `index`.
enum class OutputOwner { kSingle, kRank, kShard };

// The file name (no directory) of `file` for `owner` `index` (ignored for kSingle);
// `run` >= 2 names the trace of the run-th run into the same directory (a resume).
std::string OutputFileName(OutputFile file, OutputOwner owner, int index, int run = 1);

// out_dir + "/" + the trace name for a run that starts now: the run-1 name unless
// `resuming` and it exists, then the first of run 2, 3, ... that does not exist.
std::string TraceFileForNewRun(const std::string& out_dir, OutputOwner owner, int index,
                               bool resuming);

}  // namespace ringside

#endif  // RINGSIDE_COMMON_OUTPUT_FILES_H_
