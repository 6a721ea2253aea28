// File names made from ids a user chose (job ids): safe as one path component.
#ifndef RINGLEADER_COMMON_FILE_NAMES_H_
#define RINGLEADER_COMMON_FILE_NAMES_H_

#include <string>

namespace ringleader {

// `name` with every character other than [A-Za-z0-9._-] replaced by '_', and "job" put in
// front of an empty name or one starting with '.' (never ".", ".." or a hidden file).
inline std::string SafeFileName(std::string name) {
  for (char& c : name) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
    if (!keep) c = '_';
  }
  if (name.empty() || name[0] == '.') name.insert(0, "job");
  return name;
}

}  // namespace ringleader

#endif  // RINGLEADER_COMMON_FILE_NAMES_H_
