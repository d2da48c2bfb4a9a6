// Blocks planned apart (milp_blocks.h): each kind of block's plans from
// CBC, and every block's choice among them by chain's dynamic program.
#include "scheduler/policies/milp_blocks.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "scheduler/policies/chain.h"
#include "scheduler/policies/milp.h"

namespace remat::scheduler {

// Note [Blocks planned apart]
// Tying twins' tags (Note [Repeated blocks solved once] in milp.cpp) keeps
// the whole graph's program, whose LP bound is weak far below keep-all's
// peak: on GPT-2 124M's graph at a quarter of it, CBC needed 41 s to
// prove the tied optimum. As HiRemate (ICML 2025) does, the blocks are
// also planned apart and then put together. The graph's chain of stages
// (chain.h: cut where one value crosses) falls into segments: the stages
// of one block, and the runs of stages between blocks (GPT-2: the
// embeddings before the first block; the final norm, head and loss after
// the last). For each segment that is not a twin of an earlier one, CBC
// plans that segment alone, every node outside it and its output kept, at
// kSweep peaks evenly between keep-all's and that of dropping all it may
// (an epsilon-constraint sweep of its front of replay time against what
// it holds); each plan is an option of the segment and of its twins. The
// tags the other policies' fastest plans give a segment are options of it
// too. Chain's dynamic program then chooses, for every segment, to keep
// it whole, to replay it with its neighbours from a checkpoint, or to take
// one of its options, each option costed as chain costs a group: a
// simulation of keep-all with that segment alone changed. The program is exact for that additive model, which errs by a
// few percent both ways, so the model's front near the target is
// simulated. Unlike the tied program, a block's plan need not be its
// twin's, nor the other policies' in every segment: on GPT-2 at a quarter
// of the peak, the plan found in about a second gives its blocks the tags
// of the fastest pooled plan (the cost rule's) and replays the embeddings
// and the head from checkpoints: 73,321 nominal ms of replays, where the
// tied program's proven optimum replays 73,902; on 24 blocks at half the
// peak its blocks mix three of their options. Its plans are where milp's
// search of the tied program starts (milp.cpp): the search looks for
// faster plans and bounds the tied space within the time left.

namespace {

using policies::Chain;

// The peaks CBC plans each segment for.
constexpr int kSweep = 6;
// The fastest seeds that fit whose tags are options of every segment.
constexpr size_t kSeeds = 8;
// The model's front is taken up to the target and 1/kSlack more ...
constexpr int64_t kSlack = 8;
// ... and at most kTries of its plans are simulated.
constexpr int kTries = 16;
// A segment's program given less time than this is not solved.
constexpr double kLeastShare = 0.05;

// Keep-all, the rules' tags applied.
std::vector<Tag> keep_all(const search::Context& c) {
  return c.with_forced(std::vector<Tag>(static_cast<size_t>(c.graph.size()), Tag::Keep));
}

struct Segment {
  size_t first_stage = 0, last_stage = 0;
  int64_t first = 0, last = 0;             // positions
  int64_t twin = -1;                       // the earlier segment whose plans it takes, or -1
  std::vector<std::vector<Tag>> plans;     // CBC's, if its own (twin -1): tags of positions first..last
  std::vector<std::vector<Tag>> choices;   // its options in the model (add_options), in order
};

// The block every node of a stage is in, or "" (none, or more than one).
std::string block_of(const GraphProfile& g, const std::pair<int64_t, int64_t>& stage) {
  const std::string& block = g.nodes[stage.first].block;
  for (int64_t v = stage.first; v <= stage.second; ++v) {
    if (g.nodes[v].block != block) return "";
  }
  return block;
}

std::vector<Segment> segments_of(const search::Context& c, const Chain& chain, const RepeatedBlocks& repeats) {
  std::vector<Segment> segments;
  std::string previous;
  for (size_t s = 0; s < chain.stages.size(); ++s) {
    const std::string block = block_of(c.graph, chain.stages[s]);
    if (!segments.empty() && block == previous) {
      segments.back().last_stage = s;
      segments.back().last = chain.stages[s].second;
      continue;
    }
    segments.push_back({s, s, chain.stages[s].first, chain.stages[s].second});
    previous = block;
  }
  for (Segment& segment : segments) {
    const int64_t twin = repeats.twin_of.empty() ? -1 : repeats.twin_of[segment.first];
    if (twin < 0) continue;
    bool aligned = true;  // every node's twin at the same offset
    for (int64_t v = segment.first; v <= segment.last; ++v) {
      aligned = aligned && repeats.twin_of[v] == twin + (v - segment.first);
    }
    for (size_t k = 0; aligned && k < segments.size(); ++k) {
      const Segment& other = segments[k];
      if (other.first == twin && other.last - other.first == segment.last - segment.first && other.twin < 0) {
        segment.twin = static_cast<int64_t>(k);
        break;
      }
    }
  }
  return segments;
}

// CBC's plans of one segment alone (every node outside it, and its
// output, kept), at kSweep peaks between keep-all's (`most`) and the least
// it reaches by dropping all it may; each plan's tags of the segment's nodes.
std::vector<std::vector<Tag>> plans_of(const search::Context& c, const Segment& segment, int64_t most,
                                       double budget_s, int64_t& solves) {
  const auto start = std::chrono::steady_clock::now();
  search::Context alone = c;
  bool any = false;
  for (int64_t v = 0; v < c.graph.size(); ++v) {
    if ((v < segment.first || v >= segment.last) && !alone.forced[v]) alone.forced[v] = Tag::Keep;
    any = any || alone.taggable(v);
  }
  if (!any) return {};
  std::vector<Tag> dropped = keep_all(c);
  for (int64_t v = segment.first; v < segment.last; ++v) {
    if (alone.taggable(v)) dropped[v] = Tag::Recompute;
  }
  const int64_t least = c.simulate(dropped).peak_bytes;
  std::vector<std::vector<Tag>> plans;
  for (int k = 1; k <= kSweep && least < most; ++k) {
    const int64_t target = most - (most - least) * k / kSweep;
    const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double share = std::max(0.0, budget_s - spent) / (kSweep - k + 1);  // most programs take far less
    if (share < kLeastShare) break;
    // Without a pool: nothing is planned apart in turn.
    const auto solution = solve_milp(alone, target, {.time_limit_s = share, .blocks_once = false,
                                                     .pooled = false, .ends_by_limit = false});
    if (!solution) continue;
    solves += solution->report.solves;
    std::vector<Tag> plan(solution->tags.begin() + segment.first, solution->tags.begin() + segment.last + 1);
    if (std::find(plans.begin(), plans.end(), plan) == plans.end()) plans.push_back(std::move(plan));
  }
  return plans;
}

// The indices of `costs` that no other beats on held bytes, peak and
// time (of equal ones, the first).
std::vector<size_t> undominated(const std::vector<StageCost>& costs) {
  std::vector<size_t> kept;
  for (size_t i = 0; i < costs.size(); ++i) {
    const StageCost& b = costs[i];
    bool beaten = false;
    for (size_t j = 0; j < costs.size() && !beaten; ++j) {
      const StageCost& a = costs[j];
      const bool no_worse = a.held <= b.held && a.peak <= b.peak && a.recompute_ms <= b.recompute_ms;
      const bool better = a.held < b.held || a.peak < b.peak || a.recompute_ms < b.recompute_ms;
      beaten = no_worse && (better || j < i);
    }
    if (!beaten) kept.push_back(i);
  }
  return kept;
}

// Each segment's options: its kind's plans from CBC and the tags the
// `fastest` seeds give it (its output kept, as CBC's plans keep it, so
// that no replay reaches back into it), each costed where the segment
// stands (keep-all with that segment alone changed); those another beats
// are left out. The chain model gets them as its options.
void add_options(const search::Context& c, Chain& chain, std::vector<Segment>& segments,
                 const std::vector<const search::Candidate*>& fastest) {
  const std::vector<Tag> kept = keep_all(c);
  chain.model.options.assign(chain.stages.size(), {});
  for (Segment& segment : segments) {
    std::vector<std::vector<Tag>> choices =
        segment.twin >= 0 ? segments[static_cast<size_t>(segment.twin)].plans : segment.plans;
    for (const search::Candidate* seed : fastest) {
      std::vector<Tag> plan(seed->tags.begin() + segment.first, seed->tags.begin() + segment.last + 1);
      if (!c.forced[segment.last]) plan.back() = Tag::Keep;
      if (std::find(choices.begin(), choices.end(), plan) == choices.end()) choices.push_back(std::move(plan));
    }
    std::vector<StageCost> costs;
    for (const std::vector<Tag>& plan : choices) {
      std::vector<Tag> tags = kept;
      std::copy(plan.begin(), plan.end(), tags.begin() + segment.first);
      costs.push_back(policies::group_cost(chain, c.simulate(tags), segment.first_stage, segment.last_stage));
    }
    for (size_t i : undominated(costs)) {
      chain.model.options[segment.first_stage].push_back({segment.last_stage, costs[i]});
      segment.choices.push_back(std::move(choices[i]));
    }
  }
}

// The tags of a choice of the chain model with options.
std::vector<Tag> tags_with_options(const search::Context& c, const Chain& chain, const std::vector<Segment>& segments,
                                   const ChainChoice& choice) {
  std::vector<Tag> tags = policies::tags_of(c, chain, choice);
  for (const Segment& segment : segments) {
    const int mode = choice[segment.first_stage];
    if (mode < kOption) continue;
    const std::vector<Tag>& plan = segment.choices[static_cast<size_t>(mode - kOption)];
    std::copy(plan.begin(), plan.end(), tags.begin() + segment.first);
  }
  return tags;
}

}  // namespace

BlocksApart plan_blocks_apart(const search::Context& c, int64_t target, const RepeatedBlocks& repeats,
                              const std::vector<search::Candidate>& seeds, double time_limit_s) {
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  BlocksApart result;
  if (c.graph.nodes.empty()) return result;
  Chain chain = policies::chain_of(c);
  std::vector<Segment> segments = segments_of(c, chain, repeats);
  // Blocks whose boundaries are not the chain's cuts (every block reading
  // an encoder's output, say) make no twin segments: nothing to reuse.
  if (std::none_of(segments.begin(), segments.end(), [](const Segment& s) { return s.twin >= 0; })) return result;
  result.segments = static_cast<int64_t>(segments.size());
  for (const Segment& segment : segments) result.solved += segment.twin < 0;
  const int64_t most = c.simulate(keep_all(c)).peak_bytes;
  int64_t left = result.solved;
  for (Segment& segment : segments) {  // each an even share of the time left
    if (segment.twin >= 0) continue;
    const double share = std::max(0.0, time_limit_s - elapsed()) / static_cast<double>(left--);
    segment.plans = plans_of(c, segment, most, share, result.solves);
  }
  std::vector<const search::Candidate*> fastest;  // the kSeeds fastest seeds that fit
  for (const search::Candidate& seed : seeds) {
    if (seed.sim.peak_bytes <= target) fastest.push_back(&seed);
  }
  std::sort(fastest.begin(), fastest.end(),
            [](const auto* a, const auto* b) { return a->sim.recompute_ms < b->sim.recompute_ms; });
  if (fastest.size() > kSeeds) fastest.resize(kSeeds);
  add_options(c, chain, segments, fastest);
  for (const Segment& segment : segments) result.options += static_cast<int64_t>(segment.choices.size());

  // The model errs both ways by a few percent: its front near the target
  // is simulated from the fastest choice the model says fits, on to faster
  // ones while they fit, or to slower ones until one does.
  const std::vector<ChainChoice> front = chain_front(chain.model, target + target / kSlack);
  auto simulate_and_keep = [&](const ChainChoice& choice) {  // whether it fits
    std::vector<Tag> tags = tags_with_options(c, chain, segments, choice);
    Simulation sim = c.simulate(tags);
    const bool within = sim.peak_bytes <= target;
    result.plans.push_back({std::move(tags), std::move(sim),
                            fmt::format("milp: blocks planned apart, {}", policies::describe(choice))});
    return within;
  };
  size_t at = 0;  // the front is by peak, lowest first
  while (at + 1 < front.size() && peak_of(chain.model, front[at + 1]) <= target) ++at;
  int tries = 0;
  if (!front.empty() && simulate_and_keep(front[at])) {
    for (size_t i = at + 1; i < front.size() && ++tries < kTries && simulate_and_keep(front[i]); ++i) {}
  } else {
    for (size_t i = at; i-- > 0 && ++tries < kTries && !simulate_and_keep(front[i]);) {}
  }
  return result;
}

}  // namespace remat::scheduler
