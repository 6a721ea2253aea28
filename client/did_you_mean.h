// "Did you mean ...?" suggestions for misspelt names (YAML fields, commands, flags).
#ifndef RINGLEADER_CLIENT_DID_YOU_MEAN_H_
#define RINGLEADER_CLIENT_DID_YOU_MEAN_H_

#include <string>
#include <vector>

namespace ringleader {

// Levenshtein distance (insertions, deletions, substitutions; each costs 1).
size_t EditDistance(const std::string& a, const std::string& b);

// The candidate closest to `word` when it is plausibly a typo of it (distance at most 2, and
// less than half of `word`'s length), else "". Ties go to the earlier candidate.
std::string ClosestMatch(const std::string& word, const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" for the closest match, or "" when nothing is close.
std::string DidYouMean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace ringleader

#endif  // RINGLEADER_CLIENT_DID_YOU_MEAN_H_
