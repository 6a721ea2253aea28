// `ringleader consolidate MANIFEST -o OUT.ckpt`: a sharded checkpoint (its manifest step-N.ckpt
// and the shard files beside it) written as one consolidated checkpoint, the form final.ckpt
// has (checkpoint/sharded_checkpoint.h, ConsolidateShards). Runs offline, where the
// checkpoint directory is readable; no coordinator.
#include <string>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/file_io.h"
#include "checkpoint/sharded_checkpoint.h"
#include "client/command_util.h"
#include "client/commands.h"

namespace ringleader {
namespace {

// Writes `data` to `path` atomically with the checkpoint writer. The user names the file: a
// symbolic link as its directory is followed (DirectoryLinks::kFollow), the file itself is
// replaced, never written through.
absl::Status WriteOutput(const std::string& path, const CheckpointData& data) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("output ", path, " names a directory"));
  }
  absl::StatusOr<DirectoryHandle> handle =
      DirectoryHandle::OpenFollowingLinks("checkpoint", dir, /*create=*/true);
  if (!handle.ok()) return handle.status();
  return WriteCheckpoint(*handle, name, data);
}

}  // namespace

int RunConsolidate(const std::string& manifest_path, const std::string& output_path,
                   const CommandEnvironment& env) {
  absl::StatusOr<CheckpointData> manifest = ReadCheckpoint(manifest_path);
  if (!manifest.ok()) {
    *env.err << "error: " << manifest.status().message() << "\n";
    return kExitFailure;
  }
  if (!IsShardedManifest(*manifest)) {
    *env.err << "error: checkpoint " << manifest_path
             << " is not the manifest of a sharded checkpoint: it is already consolidated "
                "(model.init_from and export read it as it is)\n";
    return kExitFailure;
  }
  absl::StatusOr<CheckpointData> data = ConsolidateShards(manifest_path, *manifest);
  if (!data.ok()) {
    *env.err << "error: cannot consolidate " << manifest_path << ": " << data.status().message()
             << "\n";
    return kExitFailure;
  }
  if (absl::Status written = WriteOutput(output_path, *data); !written.ok()) {
    *env.err << "error: cannot write " << output_path << ": " << written.message() << "\n";
    return kExitFailure;
  }
  const std::string shards = manifest->attributes["world_size"];
  if (env.json) {
    return PrintJsonFields({{"manifest", manifest_path},
                            {"step", absl::StrCat(data->step)},
                            {"shards", shards},
                            {"tensors", absl::StrCat(data->tensors.size())},
                            {"wrote", output_path}},
                           env);
  }
  *env.out << "wrote the consolidated checkpoint of step " << data->step << " (" << shards
           << " shards, " << data->tensors.size() << " tensors) from " << manifest_path << " to "
           << output_path << "\n";
  return kExitOk;
}

}  // namespace ringleader
