// Sharded checkpoints with known contents, for the tests of consolidation and init_from.
#ifndef RINGLEADER_CHECKPOINT_SHARD_TEST_UTIL_H_
#define RINGLEADER_CHECKPOINT_SHARD_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"

namespace ringleader {

// Writes `shards` (rank r's at index r; their step and fingerprint as given) into the directory
// `dir` (created if missing) as the shard files of step `step`, then their manifest
// (BuildManifest: the files' real sizes and CRC-32s; epoch 1) as step-<step>.ckpt with `strategy`.
// Returns the manifest's path; a failure to write fails the calling test and returns "".
std::string WriteShards(const std::string& dir, uint64_t step, const std::string& fingerprint,
                        const std::vector<CheckpointData>& shards,
                        const std::string& strategy = "zero2");

// The shards zero1/zero2 would write for `whole` (a consolidated checkpoint: parameters,
// momentum buffers "<name>.momentum_buffer", buffers): rank 0's holds every tensor but the
// momentum buffers whole, in `whole`'s order; the momentum buffers, concatenated in their
// order, are cut at `cuts` (ascending element positions, one fewer than the ranks) and rank r
// holds the elements [cuts[r - 1], cuts[r]) as slices ([0, cuts[0]) for rank 0, to the end for
// the last rank), each slice a momentum buffer's part in that range.
std::vector<CheckpointData> ShardLikeZero(const CheckpointData& whole,
                                          const std::vector<uint64_t>& cuts);

}  // namespace ringleader

#endif  // RINGLEADER_CHECKPOINT_SHARD_TEST_UTIL_H_
