// Tags as remat.scheduler spells them, the words "keep" and "recompute",
// for scheduler.cpp (a rule's answer) and plans.cpp (a plan's tags).
#pragma once

#include <nanobind/nanobind.h>

#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/error.h"
#include "python/bindings.h"
#include "python/convert.h"
#include "scheduler/profile.h"

namespace remat::python {

inline Tag tag_named(const nb::handle& word, const std::string& what) {
  const std::string text = nb::cast<std::string>(nb::str(word));
  REMAT_CHECK(text == "keep" || text == "recompute", "{}: tag '{}': one of 'keep' and 'recompute'", what, text);
  return text == "keep" ? Tag::Keep : Tag::Recompute;
}

// One tag per node of `graph`, from a list of words.
inline std::vector<Tag> tags_for(const scheduler::GraphProfile& graph, const nb::handle& words, const std::string& what) {
  std::vector<Tag> tags;
  for (nb::handle word : words) tags.push_back(tag_named(word, what + " (node " + std::to_string(tags.size()) + ")"));
  REMAT_CHECK(static_cast<int64_t>(tags.size()) == graph.size(), "{}: {} tags for a graph of {} nodes: one per node",
              what, tags.size(), graph.size());
  return tags;
}

inline std::vector<std::string> tag_words(const std::vector<Tag>& tags) {
  std::vector<std::string> words;
  for (Tag tag : tags) words.emplace_back(tag_word(tag));
  return words;
}

}  // namespace remat::python
