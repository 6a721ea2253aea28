#include "client/table.h"

#include <algorithm>
#include <cassert>

#include "absl/strings/str_cat.h"

namespace ringleader {

Table::Table(std::vector<std::string> headers, std::string indent)
    : headers_(std::move(headers)), indent_(std::move(indent)) {}

void Table::AddRow(std::vector<std::string> cells) {
  assert(cells.size() <= headers_.size());
  cells.resize(headers_.size());
  rows_.push_back(std::move(cells));
}

std::string Table::Render() const {
  std::vector<size_t> widths(headers_.size());
  for (size_t c = 0; c < headers_.size(); ++c) {
    widths[c] = headers_[c].size();
    for (const auto& row : rows_) widths[c] = std::max(widths[c], row[c].size());
  }
  auto render_line = [&](const std::vector<std::string>& cells) {
    std::string line = indent_;
    for (size_t c = 0; c < cells.size(); ++c) {
      absl::StrAppend(&line, cells[c]);
      if (c + 1 < cells.size()) line.append(widths[c] - cells[c].size() + 2, ' ');
    }
    line.erase(line.find_last_not_of(' ') + 1);
    return line + "\n";
  };
  std::string text = render_line(headers_);
  for (const auto& row : rows_) text += render_line(row);
  return text;
}

}  // namespace ringleader
