// `ringleader plan`: the per-rank memory of a spec under every strategy, computed offline
// (plan/memory_plan.h); no coordinator is needed.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/command_util.h"
#include "client/commands.h"
#include "client/table.h"
#include "plan/memory_plan.h"

namespace ringleader {

std::string FormatMemoryPlan(const v1::MemoryPlan& plan, const v1::JobSpec& spec) {
  std::vector<std::string> layers;
  for (uint32_t width : spec.model().layers()) layers.push_back(absl::StrCat(width));
  std::string text = absl::StrCat(
      "memory per rank: ", spec.model().kind(), " ", absl::StrJoin(layers, "-"), " (",
      plan.parameters(), " parameters",
      plan.trainable_parameters() == plan.parameters()
          ? ""
          : absl::StrCat(", ", plan.trainable_parameters(), " trainable"),
      "), ", plan.world_size(), plan.world_size() == 1 ? " rank" : " ranks", ", sgd momentum ",
      absl::StrFormat("%g", spec.optimizer().momentum()), ", comm ", spec.sync().comm_dtype(),
      ", backend ", spec.backend(), "\n");
  Table table({"STRATEGY", "PARAMETERS", "GRADIENTS", "OPTIMIZER", "COMM_BUFFERS", "TOTAL/RANK",
               "VS_DDP", "AVAILABLE"});
  for (const v1::StrategyMemory& row : plan.strategies()) {
    const v1::RankMemory& memory = row.memory();
    table.AddRow({row.strategy() == plan.spec_strategy() ? row.strategy() + " *" : row.strategy(),
                  FormatBytes(memory.parameter_bytes()), FormatBytes(memory.gradient_bytes()),
                  FormatBytes(memory.optimizer_bytes()), FormatBytes(memory.comm_buffer_bytes()),
                  FormatBytes(memory.total_bytes()), absl::StrFormat("%.2fx", row.vs_ddp()),
                  row.available() ? "yes"
                  : row.note().empty()
                      ? "not yet"
                      : absl::StrCat("not yet: ", row.note())});
  }
  absl::StrAppend(&text, table.Render(),
                  "* the spec's strategy. Bytes of the rank holding the most; activations, the "
                  "data set and\n  the collective's own buffers are not counted (formulas: "
                  "plan/memory_plan.h).\n");
  return text;
}

int RunPlan(const SubmitOptions& options, const CommandEnvironment& env) {
  absl::StatusOr<v1::JobSpec> spec = BuildSubmitSpec(options, env);
  if (!spec.ok()) {
    *env.err << "error: invalid job spec: " << spec.status().message() << "\n";
    return kExitUsage;
  }
  absl::StatusOr<v1::MemoryPlan> plan = PlanMemory(*spec, spec->world_size());
  if (!plan.ok()) {
    *env.err << "error: cannot plan this job's memory: " << plan.status().message() << "\n";
    return kExitUsage;
  }
  if (env.json) return PrintJson(*plan, env);
  *env.out << FormatMemoryPlan(*plan, *spec);
  return kExitOk;
}

}  // namespace ringleader
