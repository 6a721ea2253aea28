// The YAML ↔ JobSpec mapping walks the proto descriptor, so every JobSpec field (present and
// future) is accepted under its proto name with its proto type, and nothing else is.
#include "client/spec_yaml.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <sstream>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/did_you_mean.h"
#include "common/status_macros.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/stubs/common.h"
#include "yaml-cpp/eventhandler.h"
#include "yaml-cpp/yaml.h"

namespace ringleader {
namespace {

using ::google::protobuf::Descriptor;
using ::google::protobuf::FieldDescriptor;
using ::google::protobuf::Message;
using ::google::protobuf::Reflection;

std::string Describe(const YAML::Node& node) {
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return absl::StrCat("'", node.Scalar(), "'");
}

std::vector<std::string> FieldNames(const Descriptor* descriptor) {
  std::vector<std::string> names;
  for (int i = 0; i < descriptor->field_count(); ++i) {
    names.push_back(descriptor->field(i)->name());
  }
  return names;
}

std::string Join(const std::string& path, const std::string& name) {
  return path.empty() ? name : absl::StrCat(path, ".", name);
}

// Proto3 strings must be UTF-8: a spec holding other bytes could not be sent (the coordinator
// cannot parse it), so they are refused here, where the file and line are known.
bool IsUtf8String(const FieldDescriptor* field, const std::string& text) {
  return field->type() != FieldDescriptor::TYPE_STRING ||
         google::protobuf::internal::IsStructurallyValidUTF8(text.data(),
                                                             static_cast<int>(text.size()));
}

std::string NotUtf8(const std::string& path) {
  return absl::StrCat(path, ": expected UTF-8 text, got bytes that are not valid UTF-8");
}

// Turns YAML nodes into fields of one message tree; records the line of every field path.
class SpecReader {
 public:
  // `with_lines`: errors say "<source>:<line>: " (a file) rather than "<source>: " (a flag).
  SpecReader(std::string source, bool with_lines, std::map<std::string, int>* field_lines)
      : source_(std::move(source)), with_lines_(with_lines), field_lines_(field_lines) {}

  absl::Status ReadMessage(const YAML::Node& node, const std::string& path, int line,
                           Message* message) {
    if (node.IsNull()) return absl::OkStatus();
    const Descriptor* descriptor = message->GetDescriptor();
    if (!node.IsMap()) {
      return Error(
          node, line,
          absl::StrCat(path.empty() ? "" : path + ": ", "expected a mapping with fields such as ",
                       absl::StrJoin(FieldNames(descriptor), ", "), "; got ", Describe(node)));
    }
    std::map<std::string, int> seen;  // field name -> line
    for (const auto& entry : node) {
      const YAML::Node& key = entry.first;
      const int key_line = LineOf(key, line);
      if (!key.IsScalar()) {
        return Error(key, line,
                     absl::StrCat(path.empty() ? "" : path + ": ", "expected a field name, got ",
                                  Describe(key)));
      }
      const std::string& name = key.Scalar();
      const std::string field_path = Join(path, name);
      const FieldDescriptor* field = descriptor->FindFieldByName(name);
      if (field == nullptr) {
        std::string suggestion = ClosestMatch(name, FieldNames(descriptor));
        return Error(
            key, line,
            absl::StrCat("unknown field '", field_path, "'",
                         suggestion.empty()
                             ? absl::StrCat(" (", path.empty() ? "a job spec" : path, " has ",
                                            absl::StrJoin(FieldNames(descriptor), ", "), ")")
                             : absl::StrCat(" (did you mean '", Join(path, suggestion), "'?)")));
      }
      auto [previous, inserted] = seen.emplace(name, key_line);
      if (!inserted) {
        return Error(key, line,
                     absl::StrCat("duplicate field '", field_path, "' (first given on line ",
                                  previous->second, "); give it once"));
      }
      if (field_lines_ != nullptr) (*field_lines_)[field_path] = key_line;
      RETURN_IF_ERROR(ReadField(entry.second, field, field_path, key_line, message));
    }
    return absl::OkStatus();
  }

  // Sets `field` of `message` from `node`; a null node clears it.
  absl::Status ReadField(const YAML::Node& node, const FieldDescriptor* field,
                         const std::string& path, int line, Message* message) {
    const Reflection* reflection = message->GetReflection();
    if (node.IsNull()) {
      reflection->ClearField(message, field);
      return absl::OkStatus();
    }
    if (field->is_map()) return ReadMap(node, field, path, line, message);
    if (!field->is_repeated()) return ReadValue(node, field, path, line, message);
    if (!node.IsSequence()) {
      return Error(node, line,
                   absl::StrCat(path, ": expected a list such as [", Example(field), ", ...], got ",
                                Describe(node)));
    }
    reflection->ClearField(message, field);
    for (size_t i = 0; i < node.size(); ++i) {
      RETURN_IF_ERROR(
          ReadValue(node[i], field, absl::StrCat(path, "[", i, "]"), LineOf(node, line), message));
    }
    return absl::OkStatus();
  }

 private:
  // A map field (e.g. env): a YAML mapping of scalar keys to values; each key once.
  absl::Status ReadMap(const YAML::Node& node, const FieldDescriptor* field,
                       const std::string& path, int line, Message* message) {
    if (!node.IsMap()) {
      return Error(node, line,
                   absl::StrCat(path, ": expected a mapping such as {NAME: value}, got ",
                                Describe(node)));
    }
    const Reflection* reflection = message->GetReflection();
    reflection->ClearField(message, field);
    const FieldDescriptor* key_field = field->message_type()->map_key();
    const FieldDescriptor* value_field = field->message_type()->map_value();
    std::map<std::string, int> seen;  // key -> line
    for (const auto& entry : node) {
      const int key_line = LineOf(entry.first, line);
      if (!entry.first.IsScalar()) {
        return Error(entry.first, line,
                     absl::StrCat(path, ": expected a name, got ", Describe(entry.first)));
      }
      const std::string entry_path = Join(path, entry.first.Scalar());
      auto [previous, inserted] = seen.emplace(entry.first.Scalar(), key_line);
      if (!inserted) {
        return Error(entry.first, line,
                     absl::StrCat("duplicate field '", entry_path, "' (first given on line ",
                                  previous->second, "); give it once"));
      }
      if (field_lines_ != nullptr) (*field_lines_)[entry_path] = key_line;
      Message* map_entry = reflection->AddMessage(message, field);
      RETURN_IF_ERROR(ReadValue(entry.first, key_field, entry_path, key_line, map_entry));
      if (entry.second.IsNull()) {
        return Error(entry.second, key_line, absl::StrCat(entry_path, ": needs a value"));
      }
      RETURN_IF_ERROR(ReadValue(entry.second, value_field, entry_path, key_line, map_entry));
    }
    return absl::OkStatus();
  }

  // Reads one value of `field` (one element when repeated).
  absl::Status ReadValue(const YAML::Node& node, const FieldDescriptor* field,
                         const std::string& path, int line, Message* message) {
    const Reflection* reflection = message->GetReflection();
    const bool repeated = field->is_repeated();
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      Message* child = repeated ? reflection->AddMessage(message, field)
                                : reflection->MutableMessage(message, field);
      return ReadMessage(node, path, LineOf(node, line), child);
    }
    if (!node.IsScalar()) {
      return Error(node, line,
                   absl::StrCat(path, ": expected ", TypeName(field), ", got ", Describe(node)));
    }
    const std::string& text = node.Scalar();
    auto wrong = [&]() {
      return Error(node, line,
                   absl::StrCat(path, ": expected ", TypeName(field), ", got '", text, "'"));
    };
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_UINT32:
      case FieldDescriptor::CPPTYPE_UINT64: {
        const uint64_t max = field->cpp_type() == FieldDescriptor::CPPTYPE_UINT32
                                 ? std::numeric_limits<uint32_t>::max()
                                 : std::numeric_limits<uint64_t>::max();
        if (absl::StartsWith(text, "-")) {
          return Error(node, line, absl::StrCat(path, ": must not be negative, got ", text));
        }
        uint64_t value = 0;
        if (text.empty() || !absl::c_all_of(text, absl::ascii_isdigit)) return wrong();
        if (!absl::SimpleAtoi(text, &value) || value > max) {
          return Error(node, line,
                       absl::StrCat(path, ": ", text, " is too large (at most ", max, ")"));
        }
        if (field->cpp_type() == FieldDescriptor::CPPTYPE_UINT32) {
          repeated ? reflection->AddUInt32(message, field, static_cast<uint32_t>(value))
                   : reflection->SetUInt32(message, field, static_cast<uint32_t>(value));
        } else {
          repeated ? reflection->AddUInt64(message, field, value)
                   : reflection->SetUInt64(message, field, value);
        }
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_INT32:
      case FieldDescriptor::CPPTYPE_INT64: {
        int64_t value = 0;
        const std::string digits = absl::StartsWith(text, "-") ? text.substr(1) : text;
        if (digits.empty() || !absl::c_all_of(digits, absl::ascii_isdigit)) return wrong();
        const bool is32 = field->cpp_type() == FieldDescriptor::CPPTYPE_INT32;
        if (!absl::SimpleAtoi(text, &value) ||
            (is32 && (value < std::numeric_limits<int32_t>::min() ||
                      value > std::numeric_limits<int32_t>::max()))) {
          return Error(node, line, absl::StrCat(path, ": ", text, " is out of range"));
        }
        if (is32) {
          repeated ? reflection->AddInt32(message, field, static_cast<int32_t>(value))
                   : reflection->SetInt32(message, field, static_cast<int32_t>(value));
        } else {
          repeated ? reflection->AddInt64(message, field, value)
                   : reflection->SetInt64(message, field, value);
        }
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_DOUBLE:
      case FieldDescriptor::CPPTYPE_FLOAT: {
        double value = 0;
        // SimpleAtod also takes "inf" and "nan"; a spec has no use for them.
        if (!absl::SimpleAtod(text, &value) || !std::isfinite(value)) return wrong();
        if (field->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE) {
          repeated ? reflection->AddDouble(message, field, value)
                   : reflection->SetDouble(message, field, value);
        } else {
          repeated ? reflection->AddFloat(message, field, static_cast<float>(value))
                   : reflection->SetFloat(message, field, static_cast<float>(value));
        }
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_BOOL: {
        const std::string lower = absl::AsciiStrToLower(text);
        if (lower != "true" && lower != "false") return wrong();
        repeated ? reflection->AddBool(message, field, lower == "true")
                 : reflection->SetBool(message, field, lower == "true");
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_STRING:
        if (!IsUtf8String(field, text)) return Error(node, line, NotUtf8(path));
        repeated ? reflection->AddString(message, field, text)
                 : reflection->SetString(message, field, text);
        return absl::OkStatus();
      case FieldDescriptor::CPPTYPE_ENUM: {
        const auto* value = field->enum_type()->FindValueByName(text);
        if (value == nullptr) return wrong();
        repeated ? reflection->AddEnum(message, field, value)
                 : reflection->SetEnum(message, field, value);
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_MESSAGE:
        break;  // handled above
    }
    return wrong();
  }

  static std::string TypeName(const FieldDescriptor* field) {
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_UINT32:
      case FieldDescriptor::CPPTYPE_UINT64:
        return "an unsigned integer";
      case FieldDescriptor::CPPTYPE_INT32:
      case FieldDescriptor::CPPTYPE_INT64:
        return "an integer";
      case FieldDescriptor::CPPTYPE_DOUBLE:
      case FieldDescriptor::CPPTYPE_FLOAT:
        return "a number";
      case FieldDescriptor::CPPTYPE_BOOL:
        return "true or false";
      case FieldDescriptor::CPPTYPE_STRING:
        return "a string";
      case FieldDescriptor::CPPTYPE_ENUM: {
        std::vector<std::string> names;
        for (int i = 0; i < field->enum_type()->value_count(); ++i) {
          names.push_back(field->enum_type()->value(i)->name());
        }
        return absl::StrCat("one of ", absl::StrJoin(names, ", "));
      }
      case FieldDescriptor::CPPTYPE_MESSAGE:
        return "a mapping";
    }
    return "a value";
  }

  static std::string Example(const FieldDescriptor* field) {
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_STRING:
        return "a";
      case FieldDescriptor::CPPTYPE_MESSAGE:
        return "{...}";
      case FieldDescriptor::CPPTYPE_BOOL:
        return "true";
      default:
        return "1";
    }
  }

  // 1-based line of `node`, or `fallback` when yaml-cpp has no mark for it (null nodes).
  static int LineOf(const YAML::Node& node, int fallback) {
    const int line = node.Mark().line;
    return line >= 0 ? line + 1 : fallback;
  }

  absl::Status Error(const YAML::Node& node, int fallback_line, const std::string& message) {
    if (!with_lines_) return absl::InvalidArgumentError(absl::StrCat(source_, ": ", message));
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ":", LineOf(node, fallback_line), ": ", message));
  }

  std::string source_;
  bool with_lines_;
  std::map<std::string, int>* field_lines_;
};

absl::Status MalformedYaml(const std::string& source, const YAML::Exception& error) {
  if (error.mark.line < 0) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": malformed YAML: ", error.msg));
  }
  return absl::InvalidArgumentError(absl::StrCat(source, ":", error.mark.line + 1, ":",
                                                 error.mark.column + 1,
                                                 ": malformed YAML: ", error.msg));
}

// Sees only where each document starts.
class DocumentStarts : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override { start_ = mark; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
  const YAML::Mark& start() const { return start_; }

 private:
  YAML::Mark start_;
};

// The number of documents in `text`, without building them. Not YAML::LoadAll: on a token that
// cannot start a document (a ',' outside a flow collection, e.g. a file holding just ",")
// yaml-cpp 0.7 reports an empty document without consuming the token, and LoadAll loops for
// ever, allocating a node each time. A document starting where the previous one did is that
// token, reported as malformed YAML. Throws YAML::Exception for other malformed YAML.
absl::StatusOr<size_t> CountDocuments(const std::string& text, const std::string& source) {
  std::istringstream stream(text);
  YAML::Parser parser(stream);
  DocumentStarts starts;
  std::optional<int> previous;
  size_t documents = 0;
  while (parser.HandleNextDocument(starts)) {
    const YAML::Mark& mark = starts.start();
    if (previous.has_value() && mark.pos == *previous) {
      const char token = mark.pos >= 0 && static_cast<size_t>(mark.pos) < text.size()
                             ? text[static_cast<size_t>(mark.pos)]
                             : '?';
      return absl::InvalidArgumentError(absl::StrCat(source, ":", mark.line + 1, ":",
                                                     mark.column + 1, ": malformed YAML: '",
                                                     std::string(1, token), "' out of place"));
    }
    previous = mark.pos;
    ++documents;
  }
  return documents;
}

}  // namespace

absl::StatusOr<JobSpecYaml> ParseJobSpecYamlWithLines(const std::string& text,
                                                      const std::string& source_name) {
  size_t documents = 0;
  YAML::Node document;
  try {
    ASSIGN_OR_RETURN(documents, CountDocuments(text, source_name));
    if (documents == 1) document = YAML::Load(text);
  } catch (const YAML::Exception& error) {
    return MalformedYaml(source_name, error);
  }
  if (documents > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ": expected one YAML document, got ", documents,
                     "; remove the extra '---' separators"));
  }
  JobSpecYaml parsed;
  if (documents == 0) return parsed;
  SpecReader reader(source_name, /*with_lines=*/true, &parsed.field_lines);
  // yaml-cpp builds nodes lazily only for the document structure, so no conversion below
  // throws; the try covers exotic input (e.g. bad aliases) all the same.
  try {
    RETURN_IF_ERROR(reader.ReadMessage(document, "", 1, &parsed.spec));
  } catch (const YAML::Exception& error) {
    return MalformedYaml(source_name, error);
  }
  return parsed;
}

absl::StatusOr<v1::JobSpec> ParseJobSpecYaml(const std::string& text,
                                             const std::string& source_name) {
  ASSIGN_OR_RETURN(JobSpecYaml parsed, ParseJobSpecYamlWithLines(text, source_name));
  return std::move(parsed.spec);
}

absl::Status SetJobSpecField(const std::string& path, const std::string& value,
                             const std::string& source_name, v1::JobSpec* spec) {
  Message* message = spec;
  const FieldDescriptor* field = nullptr;
  std::string walked;
  const std::vector<std::string> parts = absl::StrSplit(path, '.');
  for (size_t i = 0; i < parts.size(); ++i) {
    const Descriptor* descriptor = message->GetDescriptor();
    field = descriptor->FindFieldByName(parts[i]);
    const std::string here = Join(walked, parts[i]);
    if (field == nullptr) {
      const std::string match = ClosestMatch(parts[i], FieldNames(descriptor));
      return absl::InvalidArgumentError(absl::StrCat(
          source_name, ": unknown field '", here, "'",
          match.empty() ? absl::StrCat(" (", walked.empty() ? "a job spec" : walked, " has ",
                                       absl::StrJoin(FieldNames(descriptor), ", "), ")")
                        : absl::StrCat(" (did you mean '", Join(walked, match), "'?)")));
    }
    if (i + 1 < parts.size()) {
      if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE || field->is_repeated()) {
        return absl::InvalidArgumentError(
            absl::StrCat(source_name, ": '", here, "' has no sub-fields"));
      }
      message = message->GetReflection()->MutableMessage(message, field);
    }
    walked = here;
  }
  // A string is taken verbatim: YAML would eat '#' comments and turn "a: b" into a mapping.
  if (field->cpp_type() == FieldDescriptor::CPPTYPE_STRING && !field->is_repeated()) {
    if (!IsUtf8String(field, value)) {
      return absl::InvalidArgumentError(absl::StrCat(source_name, ": ", NotUtf8(path)));
    }
    message->GetReflection()->SetString(message, field, value);
    return absl::OkStatus();
  }
  YAML::Node node;
  try {
    node = YAML::Load(value);
  } catch (const YAML::Exception& error) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ": ", path, ": malformed value '", value, "': ", error.msg));
  }
  SpecReader reader(source_name, /*with_lines=*/false, nullptr);
  try {
    return reader.ReadField(node, field, path, 0, message);
  } catch (const YAML::Exception& error) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ": ", path, ": malformed value '", value, "': ", error.msg));
  }
}

absl::Status LocateSpecError(const absl::Status& status, const JobSpecYaml& parsed,
                             const std::string& source_name) {
  if (status.code() != absl::StatusCode::kInvalidArgument) return status;
  const std::string message(status.message());
  const size_t colon = message.find(": ");
  if (colon == std::string::npos) return status;
  // "model.layers[0]" -> "model.layers" -> "model": the most specific path given in the file.
  std::string path = message.substr(0, colon);
  const size_t bracket = path.find('[');
  if (bracket != std::string::npos) path = path.substr(0, bracket);
  while (!path.empty()) {
    auto it = parsed.field_lines.find(path);
    if (it != parsed.field_lines.end()) {
      return absl::InvalidArgumentError(absl::StrCat(source_name, ":", it->second, ": ", message));
    }
    const size_t dot = path.rfind('.');
    path = dot == std::string::npos ? "" : path.substr(0, dot);
  }
  return status;
}

}  // namespace ringleader
