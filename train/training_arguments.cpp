// TrainingArguments; see training_arguments.h.
//
// Every field is one row of kFields: its name, and how to set it from JSON
// and from text and to read it back, made from a member pointer by the
// type's own reader. JSON, flags and to_json all go through the table, so
// a new field is one line there.
#include "train/training_arguments.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <limits>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "comm/mpi.h"
#include "engine/error.h"
#include "scheduler/plan.h"
#include "train/parse.h"

namespace remat::train {
namespace {

using Json = nlohmann::json;
using Args = TrainingArguments;

struct Field {
  std::string_view name;
  bool is_bool = false;
  std::function<void(Args&, const Json&)> from_json;
  std::function<void(Args&, std::string_view)> from_text;
  std::function<nlohmann::ordered_json(const Args&)> to_json;
};

[[noreturn]] void bad_value(std::string_view name, std::string_view value, std::string_view expected) {
  REMAT_FAIL("training argument {}: '{}' is not {}", name, value, expected);
}

bool bool_of(std::string_view name, std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "true" || lower == "1" || lower == "yes") return true;
  if (lower == "false" || lower == "0" || lower == "no") return false;
  bad_value(name, text, "a bool (true or false)");
}

double double_of(std::string_view name, std::string_view text) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    bad_value(name, text, "a finite number");
  }
  return value;
}

template <class Integer>
Integer integer_of(std::string_view name, std::string_view text) {
  Integer value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    bad_value(name, text, std::is_signed_v<Integer> ? "an integer" : "a non-negative integer");
  }
  return value;
}

// A JSON value from a flag's text (a kwargs object); `example` shows the form.
Json json_of(std::string_view name, std::string_view text, std::string_view example) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) bad_value(name, text, fmt::format("JSON such as {}", example));
  return j;
}

bool is_null_text(std::string_view text) { return text == "none" || text == "None" || text == "null"; }

// Readers of one type: T from JSON, T from text, T to JSON.
template <class T>
struct Reader;

template <>
struct Reader<std::string> {
  static std::string from_json(std::string_view name, const Json& j) {
    if (!j.is_string()) bad_value(name, j.dump(), "a string");
    return j.get<std::string>();
  }
  static std::string from_text(std::string_view, std::string_view text) { return std::string(text); }
  static nlohmann::ordered_json to_json(const std::string& v) { return v; }
};

template <>
struct Reader<bool> {
  static bool from_json(std::string_view name, const Json& j) {
    if (!j.is_boolean()) bad_value(name, j.dump(), "a bool (true or false)");
    return j.get<bool>();
  }
  static bool from_text(std::string_view name, std::string_view text) { return bool_of(name, text); }
  static nlohmann::ordered_json to_json(bool v) { return v; }
};

template <>
struct Reader<double> {
  static double from_json(std::string_view name, const Json& j) {
    if (!j.is_number()) bad_value(name, j.dump(), "a number");
    return j.get<double>();
  }
  static double from_text(std::string_view name, std::string_view text) { return double_of(name, text); }
  static nlohmann::ordered_json to_json(double v) { return v; }
};

template <class Integer>
  requires std::is_integral_v<Integer> && (!std::is_same_v<Integer, bool>)
struct Reader<Integer> {
  static Integer from_json(std::string_view name, const Json& j) {
    const bool ok = std::is_signed_v<Integer> ? j.is_number_integer() : j.is_number_unsigned();
    if (!ok) bad_value(name, j.dump(), std::is_signed_v<Integer> ? "an integer" : "a non-negative integer");
    return j.get<Integer>();
  }
  static Integer from_text(std::string_view name, std::string_view text) { return integer_of<Integer>(name, text); }
  static nlohmann::ordered_json to_json(Integer v) { return v; }
};

template <class T>
struct Reader<std::optional<T>> {
  static std::optional<T> from_json(std::string_view name, const Json& j) {
    if (j.is_null()) return std::nullopt;
    return Reader<T>::from_json(name, j);
  }
  static std::optional<T> from_text(std::string_view name, std::string_view text) {
    if (is_null_text(text)) return std::nullopt;
    return Reader<T>::from_text(name, text);
  }
  static nlohmann::ordered_json to_json(const std::optional<T>& v) {
    return v ? Reader<T>::to_json(*v) : nlohmann::ordered_json(nullptr);
  }
};

// gradient_checkpointing_kwargs: a JSON object, from a file or as a flag's text.
template <>
struct Reader<GradientCheckpointingKwargs> {
  static GradientCheckpointingKwargs from_json(std::string_view name, const Json& j) {
    if (!j.is_object()) bad_value(name, j.dump(), "an object such as {\"policy\": \"cost\", \"budget\": \"64MiB\"}");
    GradientCheckpointingKwargs kwargs;
    for (const auto& [key, value] : j.items()) {
      const std::string field = fmt::format("{}.{}", name, key);
      if (key == "policy") {
        kwargs.policy = Reader<std::string>::from_json(field, value);
      } else if (key == "budget") {
        if (value.is_null()) kwargs.budget.reset();
        else if (value.is_number_integer()) kwargs.budget = value.get<int64_t>();
        else if (value.is_string()) kwargs.budget = parse_bytes(value.get<std::string>(), field);
        else bad_value(field, value.dump(), "a byte count (4096 or \"64MiB\")");
      } else if (std::vector<std::string>* rules = kwargs.rules(key)) {
        if (!value.is_array()) bad_value(field, value.dump(), "a list of ops or node-name globs (\"h.*.attn/*\")");
        rules->clear();
        for (const Json& rule : value) rules->push_back(Reader<std::string>::from_json(field, rule));
      } else if (key == "first_step") {
        kwargs.first_step = Reader<std::string>::from_json(field, value);
      } else {
        REMAT_FAIL("training argument {}: unknown key '{}' (known: policy, budget, must_keep, must_recompute, "
                   "prefer_keep, prefer_recompute, first_step)", name, key);
      }
    }
    return kwargs;
  }
  static GradientCheckpointingKwargs from_text(std::string_view name, std::string_view text) {
    return from_json(name, json_of(name, text, R"({"policy": "cost", "budget": "64MiB"})"));
  }
  static nlohmann::ordered_json to_json(const GradientCheckpointingKwargs& k) {
    nlohmann::ordered_json j;
    j["policy"] = k.policy;
    j["budget"] = k.budget ? nlohmann::ordered_json(*k.budget) : nlohmann::ordered_json(nullptr);
    j["must_keep"] = k.must_keep;
    j["must_recompute"] = k.must_recompute;
    j["prefer_keep"] = k.prefer_keep;
    j["prefer_recompute"] = k.prefer_recompute;
    j["first_step"] = k.first_step;
    return j;
  }
};

// lr_scheduler_kwargs: a JSON object, from a file or as a flag's text.
template <>
struct Reader<LrSchedulerKwargs> {
  static LrSchedulerKwargs from_json(std::string_view name, const Json& j) {
    if (!j.is_object()) bad_value(name, j.dump(), "an object such as {\"min_lr_rate\": 0.1}");
    LrSchedulerKwargs kwargs;
    for (const auto& [key, value] : j.items()) {
      REMAT_CHECK(key == "min_lr_rate", "training argument {}: unknown key '{}' (known: min_lr_rate)", name, key);
      kwargs.min_lr_rate = Reader<std::optional<double>>::from_json(fmt::format("{}.{}", name, key), value);
    }
    return kwargs;
  }
  static LrSchedulerKwargs from_text(std::string_view name, std::string_view text) {
    return from_json(name, json_of(name, text, R"({"min_lr_rate": 0.1})"));
  }
  static nlohmann::ordered_json to_json(const LrSchedulerKwargs& k) {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    if (k.min_lr_rate) j["min_lr_rate"] = *k.min_lr_rate;
    return j;
  }
};

// A byte count: an integer, or text such as "256MiB" (parse_bytes); null
// or "none" unsets it.
Field byte_field(std::string_view name, std::optional<int64_t> Args::*member) {
  return Field{
      .name = name,
      .from_json = [name, member](Args& a, const Json& j) {
        if (j.is_null()) a.*member = std::nullopt;
        else if (j.is_number_integer()) a.*member = j.get<int64_t>();
        else if (j.is_string()) a.*member = parse_bytes(j.get<std::string>(), fmt::format("training argument {}", name));
        else bad_value(name, j.dump(), "a byte count (4096 or \"256MiB\")");
      },
      .from_text = [name, member](Args& a, std::string_view t) {
        a.*member = is_null_text(t) ? std::nullopt
                                    : std::optional(parse_bytes(t, fmt::format("training argument {}", name)));
      },
      .to_json = [member](const Args& a) { return Reader<std::optional<int64_t>>::to_json(a.*member); },
  };
}

template <class T>
Field field(std::string_view name, T Args::*member) {
  return Field{
      .name = name,
      .is_bool = std::is_same_v<T, bool> || std::is_same_v<T, std::optional<bool>>,
      .from_json = [name, member](Args& a, const Json& j) { a.*member = Reader<T>::from_json(name, j); },
      .from_text = [name, member](Args& a, std::string_view t) { a.*member = Reader<T>::from_text(name, t); },
      .to_json = [member](const Args& a) { return Reader<T>::to_json(a.*member); },
  };
}

const std::vector<Field>& fields() {
  static const std::vector<Field> table{
      field("output_dir", &Args::output_dir),
      field("overwrite_output_dir", &Args::overwrite_output_dir),
      field("num_train_epochs", &Args::num_train_epochs),
      field("max_steps", &Args::max_steps),
      field("per_device_train_batch_size", &Args::per_device_train_batch_size),
      field("auto_find_batch_size", &Args::auto_find_batch_size),
      byte_field("memory_limit", &Args::memory_limit),
      field("per_device_eval_batch_size", &Args::per_device_eval_batch_size),
      field("learning_rate", &Args::learning_rate),
      field("weight_decay", &Args::weight_decay),
      field("adam_beta1", &Args::adam_beta1),
      field("adam_beta2", &Args::adam_beta2),
      field("adam_epsilon", &Args::adam_epsilon),
      field("max_grad_norm", &Args::max_grad_norm),
      field("lr_scheduler_type", &Args::lr_scheduler_type),
      field("lr_scheduler_kwargs", &Args::lr_scheduler_kwargs),
      field("warmup_steps", &Args::warmup_steps),
      field("warmup_ratio", &Args::warmup_ratio),
      field("eval_strategy", &Args::eval_strategy),
      field("eval_steps", &Args::eval_steps),
      field("logging_steps", &Args::logging_steps),
      field("save_strategy", &Args::save_strategy),
      field("save_steps", &Args::save_steps),
      field("save_total_limit", &Args::save_total_limit),
      field("load_best_model_at_end", &Args::load_best_model_at_end),
      field("metric_for_best_model", &Args::metric_for_best_model),
      field("greater_is_better", &Args::greater_is_better),
      field("gradient_accumulation_steps", &Args::gradient_accumulation_steps),
      field("gradient_checkpointing", &Args::gradient_checkpointing),
      field("gradient_checkpointing_kwargs", &Args::gradient_checkpointing_kwargs),
      field("local_sgd_steps", &Args::local_sgd_steps),
      field("diloco", &Args::diloco),
      field("outer_lr", &Args::outer_lr),
      field("outer_momentum", &Args::outer_momentum),
      field("seed", &Args::seed),
      field("resume_from_checkpoint", &Args::resume_from_checkpoint),
      field("max_time", &Args::max_time),
      field("device", &Args::device),
      field("tf32", &Args::tf32),
      field("fused_epilogues", &Args::fused_epilogues),
  };
  return table;
}

const Field* find_field(std::string_view name) {
  const std::string key = training_argument_name(name);
  for (const Field& f : fields()) {
    if (f.name == key) return &f;
  }
  return nullptr;
}

const Field& field_named(std::string_view name, std::string_view source) {
  const Field* f = find_field(name);
  REMAT_CHECK(f != nullptr, "{}: unknown training argument '{}' (known: {})", source, name,
              fmt::join(training_argument_names(), ", "));
  return *f;
}

void check_choice(std::string_view name, const std::string& value, std::initializer_list<std::string_view> choices) {
  REMAT_CHECK(std::find(choices.begin(), choices.end(), value) != choices.end(),
              "training argument {}: '{}' is not one of {}", name, value, fmt::join(choices, ", "));
}

}  // namespace

std::string training_argument_name(std::string_view name) {
  std::string out(name);
  std::replace(out.begin(), out.end(), '-', '_');
  return out == "evaluation_strategy" ? std::string("eval_strategy") : out;
}

const std::vector<std::string_view>& training_argument_names() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> out;
    for (const Field& f : fields()) out.push_back(f.name);
    return out;
  }();
  return names;
}

void set_distribution(TrainingArguments& args, int64_t gradient_accumulation_steps, int64_t local_sgd_steps,
                      const std::optional<comm::DiLoCoOptions>& diloco) {
  args.gradient_accumulation_steps = gradient_accumulation_steps;
  args.local_sgd_steps = local_sgd_steps;
  args.diloco = diloco.has_value();
  if (diloco) {
    args.outer_lr = diloco->outer_lr;
    args.outer_momentum = diloco->momentum;
  }
}

bool names_training_argument(const std::vector<std::string>& flags, std::string_view name) {
  const std::string wanted = training_argument_name(name);
  for (const std::string& flag : flags) {
    if (!flag.starts_with("--")) continue;
    const std::string_view body = std::string_view(flag).substr(2);
    if (training_argument_name(body.substr(0, body.find('='))) == wanted) return true;
  }
  return false;
}

void apply_json(TrainingArguments& args, const nlohmann::json& object, std::string_view source) {
  REMAT_CHECK(object.is_object(), "{}: training arguments must be a JSON object, got {}", source,
              object.type_name());
  std::map<std::string_view, std::string> given;  // field -> the key that set it
  for (const auto& [name, value] : object.items()) {
    const Field& field = field_named(name, source);
    const auto [previous, fresh] = given.emplace(field.name, name);
    REMAT_CHECK(fresh, "{}: '{}' and '{}' are the same training argument: give one", source, previous->second, name);
    field.from_json(args, value);
  }
}

TrainingArguments load_training_arguments(const std::string& path) {
  std::ifstream file(path);
  REMAT_CHECK(file.good(), "training arguments '{}': cannot be read (missing, or not a file)", path);
  std::stringstream text;
  text << file.rdbuf();
  const Json j = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  REMAT_CHECK(!j.is_discarded(), "training arguments '{}': not JSON", path);
  TrainingArguments args;
  apply_json(args, j, fmt::format("training arguments '{}'", path));
  return args;
}

bool is_training_argument(std::string_view name) { return find_field(name) != nullptr; }

bool is_bool_training_argument(std::string_view name) {
  const Field* f = find_field(name);
  return f != nullptr && f->is_bool;
}

void set_training_argument(TrainingArguments& args, std::string_view name, std::string_view value) {
  field_named(name, "flags").from_text(args, value);
}

namespace {

// One flag of a list as apply_flags reads it: its field, the flag as the
// user wrote it ("--learning-rate 1e-3", "--max_steps=6", "--tf32"), and
// its value's text.
struct FlagGiven {
  const Field* field = nullptr;
  std::string as_given;
  std::string value;
};

std::vector<FlagGiven> read_flags(const std::vector<std::string>& flags) {
  std::vector<FlagGiven> out;
  for (size_t i = 0; i < flags.size(); ++i) {
    const std::string& flag = flags[i];
    REMAT_CHECK(flag.starts_with("--") && flag.size() > 2, "flags: expected --name, got '{}'", flag);
    const std::string_view body = std::string_view(flag).substr(2);
    const size_t equals = body.find('=');
    const std::string_view name = body.substr(0, equals);
    const Field* f = find_field(name);
    REMAT_CHECK(f != nullptr, "flags: unknown flag --{}: not a training argument (known, with dashes or "
                "underscores: {})", name, fmt::join(training_argument_names(), ", "));
    if (equals != std::string_view::npos) {
      out.push_back({f, flag, std::string(body.substr(equals + 1))});
    } else if (f->is_bool && (i + 1 == flags.size() || flags[i + 1].starts_with("--"))) {
      out.push_back({f, flag, "true"});  // a bare bool flag
    } else {
      REMAT_CHECK(i + 1 < flags.size() && !flags[i + 1].starts_with("--"), "flags: --{} needs a value{}", name,
                  i + 1 < flags.size() ? fmt::format(", not the flag {} (--{}=VALUE gives a value that starts with "
                                                     "dashes)", flags[i + 1], name)
                                       : std::string());
      out.push_back({f, flag + " " + flags[i + 1], flags[i + 1]});
      ++i;
    }
  }
  return out;
}

// A value as a message shows it: text bare, anything else as JSON.
std::string shown(const nlohmann::ordered_json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

}  // namespace

// Note [One value per setting]: a field named twice, in one spelling or two
// (--max-steps and --max_steps), with two values is an error naming both,
// never the last one silently; the same value twice is no conflict.
void apply_flags(TrainingArguments& args, const std::vector<std::string>& flags) {
  std::map<std::string_view, std::pair<std::string, nlohmann::ordered_json>> given;  // field -> flag, value
  for (const FlagGiven& flag : read_flags(flags)) {
    flag.field->from_text(args, flag.value);
    const nlohmann::ordered_json value = flag.field->to_json(args);
    const auto [previous, fresh] = given.try_emplace(flag.field->name, flag.as_given, value);
    REMAT_CHECK(fresh || previous->second.second == value, "flags: {} and {} give training argument {} two values "
                "({} and {}): give one", previous->second.first, flag.as_given, flag.field->name,
                shown(previous->second.second), shown(value));
  }
}

std::optional<std::string> flag_giving(const std::vector<std::string>& flags, std::string_view name) {
  const std::string wanted = training_argument_name(name);
  std::optional<std::string> found;
  for (const FlagGiven& flag : read_flags(flags)) {
    if (flag.field->name == wanted) found = flag.as_given;
  }
  return found;
}

void check_one_value(const TrainingArguments& task_args, std::string_view task_flag, std::string_view name,
                     const std::vector<std::string>& trainer_flags) {
  const std::optional<std::string> other = flag_giving(trainer_flags, name);
  if (!other) return;
  const Field& f = field_named(name, "check_one_value");
  TrainingArguments with_flags = task_args;
  apply_flags(with_flags, trainer_flags);
  const nlohmann::ordered_json task_value = f.to_json(task_args), flag_value = f.to_json(with_flags);
  REMAT_CHECK(task_value == flag_value, "train: {} {} and {} give training argument {} two values ({} and {}): "
              "give one", task_flag, shown(task_value), *other, f.name, shown(task_value), shown(flag_value));
}

std::string describe_distribution(const TrainingArguments& args) {
  const bool mpi = comm::Mpi::launched_by_mpi();
  const int ranks = comm::Mpi::launch_size();
  std::string out = !mpi ? "1 process" : ranks > 0 ? fmt::format("{} ranks (mpi)", ranks) : "mpi";
  if (args.local_sgd_steps > 0) {
    out += fmt::format(", {} every {} steps", args.diloco ? "DiLoCo" : "LocalSGD", args.local_sgd_steps);
    if (args.diloco) out += fmt::format(" (outer lr {}, momentum {})", args.outer_lr, args.outer_momentum);
  } else if (mpi) {
    out += ", synchronous data parallel";
  }
  if (args.gradient_accumulation_steps > 1) {
    out += fmt::format(", {} micro-batches per step", args.gradient_accumulation_steps);
  }
  return out;
}

nlohmann::ordered_json to_json(const TrainingArguments& args) {
  nlohmann::ordered_json j;
  for (const Field& f : fields()) j[std::string(f.name)] = f.to_json(args);
  return j;
}

void check(const TrainingArguments& a) {
  const auto positive = [](std::string_view name, auto value) {
    REMAT_CHECK(value > 0, "training argument {}: must be more than 0, got {}", name, value);
  };
  const auto non_negative = [](std::string_view name, auto value) {
    REMAT_CHECK(value >= 0, "training argument {}: must be at least 0, got {}", name, value);
  };
  REMAT_CHECK(a.max_steps > 0 || a.max_steps == -1, "training argument max_steps: must be more than 0, or -1 "
              "(train for num_train_epochs), got {}", a.max_steps);
  if (a.max_steps == -1) positive("num_train_epochs", a.num_train_epochs);
  positive("per_device_train_batch_size", a.per_device_train_batch_size);
  positive("per_device_eval_batch_size", a.per_device_eval_batch_size);
  positive("learning_rate", a.learning_rate);
  non_negative("weight_decay", a.weight_decay);
  REMAT_CHECK(a.adam_beta1 >= 0 && a.adam_beta1 < 1, "training argument adam_beta1: must be in [0, 1), got {}",
              a.adam_beta1);
  REMAT_CHECK(a.adam_beta2 >= 0 && a.adam_beta2 < 1, "training argument adam_beta2: must be in [0, 1), got {}",
              a.adam_beta2);
  positive("adam_epsilon", a.adam_epsilon);
  non_negative("max_grad_norm", a.max_grad_norm);
  check_choice("lr_scheduler_type", a.lr_scheduler_type,
               {"linear", "cosine", "cosine_with_min_lr", "constant", "constant_with_warmup"});
  const std::optional<double>& floor = a.lr_scheduler_kwargs.min_lr_rate;
  REMAT_CHECK(a.lr_scheduler_type != "cosine_with_min_lr" || floor, "training argument lr_scheduler_type: "
              "cosine_with_min_lr needs lr_scheduler_kwargs {{\"min_lr_rate\": ...}}, the floor as a fraction of "
              "learning_rate");
  REMAT_CHECK(!floor || a.lr_scheduler_type == "cosine_with_min_lr", "training argument lr_scheduler_kwargs: "
              "min_lr_rate is cosine_with_min_lr's, not {}'s", a.lr_scheduler_type);
  REMAT_CHECK(!floor || (*floor >= 0 && *floor <= 1), "training argument lr_scheduler_kwargs.min_lr_rate: must be "
              "in [0, 1], got {}", floor.value_or(0));
  non_negative("warmup_steps", a.warmup_steps);
  REMAT_CHECK(a.warmup_ratio >= 0 && a.warmup_ratio <= 1, "training argument warmup_ratio: must be in [0, 1], got {}",
              a.warmup_ratio);
  check_choice("eval_strategy", a.eval_strategy, {"no", "steps", "epoch"});
  if (a.eval_steps) positive("eval_steps", *a.eval_steps);
  positive("logging_steps", a.logging_steps);
  check_choice("save_strategy", a.save_strategy, {"no", "steps", "epoch"});
  positive("save_steps", a.save_steps);
  if (a.save_total_limit) positive("save_total_limit", *a.save_total_limit);
  REMAT_CHECK(!a.load_best_model_at_end || (a.eval_strategy != "no" && a.eval_strategy == a.save_strategy),
              "training argument load_best_model_at_end: needs eval_strategy and save_strategy to be the same and not "
              "'no' (got {} and {})", a.eval_strategy, a.save_strategy);
  REMAT_CHECK(!a.load_best_model_at_end || a.eval_strategy != "steps" ||
                  a.save_steps % a.eval_steps.value_or(a.logging_steps) == 0,
              "training argument load_best_model_at_end: save_steps ({}) must be a multiple of eval_steps ({})",
              a.save_steps, a.eval_steps.value_or(a.logging_steps));
  positive("gradient_accumulation_steps", a.gradient_accumulation_steps);
  if (a.memory_limit) positive("memory_limit", *a.memory_limit);
  REMAT_CHECK(!a.auto_find_batch_size || a.memory_limit, "training argument auto_find_batch_size: needs memory_limit "
              "(the bytes a step may hold at its peak, e.g. 256MiB): remat finds the batch by planning the step, not "
              "by running out of memory");
  if (a.gradient_checkpointing) {
    scheduler::check_policy(a.gradient_checkpointing_kwargs.policy);
    scheduler::check_first_step(a.gradient_checkpointing_kwargs.first_step);
    const std::string& policy = a.gradient_checkpointing_kwargs.policy;
    REMAT_CHECK(!a.gradient_checkpointing_kwargs.budget || scheduler::takes_budget(policy),
                "training argument gradient_checkpointing_kwargs: policy {} takes no budget ({} do)", policy,
                scheduler::budget_policies());
    if (a.gradient_checkpointing_kwargs.budget) {
      positive("gradient_checkpointing_kwargs.budget", *a.gradient_checkpointing_kwargs.budget);
    }
  }
  non_negative("local_sgd_steps", a.local_sgd_steps);
  REMAT_CHECK(!a.diloco || a.local_sgd_steps > 0, "training argument diloco: needs local_sgd_steps > 0");
  positive("outer_lr", a.outer_lr);
  REMAT_CHECK(a.outer_momentum >= 0 && a.outer_momentum < 1, "training argument outer_momentum: must be in [0, 1), "
              "got {}", a.outer_momentum);
  if (a.max_time) positive("max_time", *a.max_time);
}

}  // namespace remat::train
