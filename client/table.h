// Plain-text tables for the CLI: left-aligned columns separated by two spaces.
//
//   Table table({"RANK", "STEP"});
//   table.AddRow({"0", "120"});
//   out << table.Render();
#ifndef RINGLEADER_CLIENT_TABLE_H_
#define RINGLEADER_CLIENT_TABLE_H_

#include <string>
#include <vector>

namespace ringleader {

// Not thread-safe.
class Table {
 public:
  explicit Table(std::vector<std::string> headers, std::string indent = "");

  // Rows shorter than the header are padded with empty cells; longer ones are a programmer bug.
  void AddRow(std::vector<std::string> cells);
  size_t rows() const { return rows_.size(); }

  // Header and rows, each line ending in '\n', without trailing spaces.
  std::string Render() const;

 private:
  std::vector<std::string> headers_;
  std::string indent_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace ringleader

#endif  // RINGLEADER_CLIENT_TABLE_H_
