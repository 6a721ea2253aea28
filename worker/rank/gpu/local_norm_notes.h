// The GPU runner's bookkeeping of the local (pre-sync) gradient norm between two
// TakeLocalSquaredNorm calls, as host code so it is tested without a GPU
// (local_norm_notes_test.cc).
//
// ModelRunner::NoteLocalGradient(i) ADDS the squared norm of gradient i as it is now: under
// strategies zero2 and fsdp with gradient accumulation each gradient is noted once per
// micro-batch (each micro-batch's gradient is reduce-scattered on its own), and the CPU runner
// adds every note. On the GPU a note launches the squared-sum kernel over the gradient into
// parameter i's kSquaredSumBlocks device partials: the first note of parameter i since the last
// Take WRITES them (whatever they hold is an earlier step's), every later note ADDS to them
// (LaunchAddSquaredSumPartials). Take sums the noted parameters' partials only.
//
//   LocalNormNotes notes(parameters.size());
//   if (notes.Note(i) == LocalNormNotes::Launch::kWrite) ... else ...;  // per noted gradient
//   double squared = notes.any() ? notes.Take(partials_copied_to_host, kSquaredSumBlocks) : 0;
//
// Thread-safety: not thread-safe (the runner's training thread).
#ifndef RINGLEADER_WORKER_RANK_GPU_LOCAL_NORM_NOTES_H_
#define RINGLEADER_WORKER_RANK_GPU_LOCAL_NORM_NOTES_H_

#include <cstddef>
#include <vector>

namespace ringleader {

class LocalNormNotes {
 public:
  // How a note reaches parameter i's partials.
  enum class Launch {
    kWrite,  // the first note since the last Take/Clear: partials = this note's sums
    kAdd,    // a later one: partials += this note's sums
  };

  explicit LocalNormNotes(size_t parameters) : noted_(parameters, false) {}

  // Records a note of parameter i (i < parameters). Returns how the kernel must take it.
  Launch Note(size_t i);
  // Whether any parameter was noted since the last Take / Clear.
  bool any() const { return any_; }
  // The sum of the noted parameters' partials (`blocks` doubles per parameter, parameter-major,
  // at least blocks x parameters of them), added in parameter then block order (deterministic);
  // then forgets every note. 0 when none was noted.
  double Take(const std::vector<double>& partials, size_t blocks);
  // Forgets every note without summing (after an error).
  void Clear();

 private:
  std::vector<bool> noted_;
  bool any_ = false;
};

}  // namespace ringleader

#endif  // RINGLEADER_WORKER_RANK_GPU_LOCAL_NORM_NOTES_H_
