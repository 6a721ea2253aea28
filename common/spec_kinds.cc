// The spec's words <-> enums: one table per field.
#include "common/spec_kinds.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringleader {
namespace {

template <typename E>
using Words = std::vector<std::pair<E, const char*>>;

const Words<Strategy>& StrategyWords() {
  static const auto* words = new Words<Strategy>{{Strategy::kDdp, "ddp"},
                                                 {Strategy::kZero1, "zero1"},
                                                 {Strategy::kZero2, "zero2"},
                                                 {Strategy::kFsdp, "fsdp"}};
  return *words;
}
const Words<Backend>& BackendWords() {
  static const auto* words = new Words<Backend>{{Backend::kGloo, "gloo"}, {Backend::kNccl, "nccl"}};
  return *words;
}
const Words<CheckpointFormat>& FormatWords() {
  static const auto* words = new Words<CheckpointFormat>{
      {CheckpointFormat::kConsolidated, "consolidated"}, {CheckpointFormat::kSharded, "sharded"}};
  return *words;
}
const Words<Precision>& PrecisionWords() {
  static const auto* words =
      new Words<Precision>{{Precision::kFp32, "fp32"}, {Precision::kBf16, "bf16"}};
  return *words;
}

// "ddp, zero1, zero2 or fsdp"
template <typename E>
std::string Expected(const Words<E>& words) {
  std::vector<std::string> all;
  for (const auto& [value, word] : words) all.push_back(word);
  const std::string last = all.back();
  all.pop_back();
  return absl::StrCat(absl::StrJoin(all, ", "), " or ", last);
}

template <typename E>
absl::StatusOr<E> Parse(const Words<E>& words, absl::string_view field, absl::string_view noun,
                        absl::string_view word) {
  for (const auto& [value, w] : words) {
    if (word == w) return value;
  }
  return absl::InvalidArgumentError(absl::StrCat(field, ": unknown ", noun, " '", word,
                                                 "' (expected ", Expected(words), ")"));
}

// An empty or unknown word is the field's default (the table's first entry).
template <typename E>
E ValueOr(const Words<E>& words, absl::string_view word) {
  for (const auto& [value, w] : words) {
    if (word == w) return value;
  }
  return words.front().first;
}

template <typename E>
std::string NameIn(const Words<E>& words, E value) {
  for (const auto& [v, w] : words) {
    if (v == value) return w;
  }
  return "?";
}

}  // namespace

absl::StatusOr<Strategy> ParseStrategy(absl::string_view word) {
  return Parse(StrategyWords(), "strategy", "strategy", word);
}
absl::StatusOr<Backend> ParseBackend(absl::string_view word) {
  return Parse(BackendWords(), "backend", "backend", word);
}
absl::StatusOr<CheckpointFormat> ParseCheckpointFormat(absl::string_view word) {
  return Parse(FormatWords(), "checkpoint_format", "format", word);
}
absl::StatusOr<Precision> ParsePrecision(absl::string_view field, absl::string_view word) {
  return Parse(PrecisionWords(), field, field == "mixed_precision" ? "precision" : "dtype", word);
}

Strategy StrategyOf(const v1::JobSpec& spec) { return ValueOr(StrategyWords(), spec.strategy()); }
Backend BackendOf(const v1::JobSpec& spec) { return ValueOr(BackendWords(), spec.backend()); }
CheckpointFormat CheckpointFormatOf(const v1::JobSpec& spec) {
  return ValueOr(FormatWords(), spec.checkpoint_format());
}
Precision CommDtypeOf(const v1::JobSpec& spec) {
  return ValueOr(PrecisionWords(), spec.sync().comm_dtype());
}
Precision MixedPrecisionOf(const v1::JobSpec& spec) {
  return ValueOr(PrecisionWords(), spec.mixed_precision());
}

std::string Name(Strategy strategy) { return NameIn(StrategyWords(), strategy); }
std::string Name(Backend backend) { return NameIn(BackendWords(), backend); }
std::string Name(CheckpointFormat format) { return NameIn(FormatWords(), format); }
std::string Name(Precision precision) { return NameIn(PrecisionWords(), precision); }

const StrategyTraits& TraitsOf(Strategy strategy) {
  static const StrategyTraits kDdp{};
  static const StrategyTraits kZero1{true, false, false, "optimizer state"};
  static const StrategyTraits kZero2{true, true, false, "gradients and optimizer state"};
  static const StrategyTraits kFsdp{true, true, true, "parameters, gradients and optimizer state"};
  switch (strategy) {
    case Strategy::kZero1:
      return kZero1;
    case Strategy::kZero2:
      return kZero2;
    case Strategy::kFsdp:
      return kFsdp;
    case Strategy::kDdp:
      break;
  }
  return kDdp;
}

const std::vector<Strategy>& AllStrategies() {
  static const auto* all = [] {
    auto* strategies = new std::vector<Strategy>;
    for (const auto& [value, word] : StrategyWords()) strategies->push_back(value);
    return strategies;
  }();
  return *all;
}

}  // namespace ringleader
