#include "support/CommandLine.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <sstream>
#include <sys/stat.h>

#ifndef OCTET_VERSION
#error "OCTET_VERSION is set by support/CMakeLists.txt from the top level"
#endif

namespace octet::cli {
namespace {

constexpr size_t kNameColumn = 26;
// The group of options shown without brackets in the usage line.
constexpr const char *kRequiredGroup = "required";
constexpr size_t kWidth = 79;

// The house help layout: a usage line made from the options, the
// description, the commands (for a command that has some), the options,
// the footer. `summary` is what the parent's list of commands shows.
class HouseFormatter : public CLI::Formatter {
public:
  explicit HouseFormatter(HelpText help) : help_(std::move(help)) {}
  const HelpText &text() const { return help_; }

  std::string make_help(const CLI::App *app, std::string,
                        CLI::AppFormatMode) const override {
    std::ostringstream out;
    out << usage(*app) << "\n";
    if (!help_.description.empty())
      out << "\n" << help_.description << "\n";
    std::vector<const CLI::App *> commands = commandsOf(*app);
    if (!commands.empty()) {
      out << "\ncommands:\n";
      for (const CLI::App *sub : commands)
        CLI::detail::format_help(out, sub->get_name(), summaryOf(*sub), 14);
    }
    std::vector<const CLI::Option *> positionals = app->get_options(
        [](const CLI::Option *o) { return o->get_positional(); });
    std::vector<const CLI::Option *> options = app->get_options(
        [](const CLI::Option *o) {
          return o->nonpositional() && !o->get_group().empty();
        });
    if (!positionals.empty()) {
      out << "\narguments:\n";
      for (const CLI::Option *o : positionals)
        CLI::detail::format_help(out, positionalName(*o),
                                 o->get_description(), kNameColumn);
    }
    out << "\noptions:\n";
    for (const CLI::Option *o : options)
      CLI::detail::format_help(out, namesOf(*o), o->get_description(),
                               kNameColumn);
    if (!help_.footer.empty())
      out << "\n" << help_.footer << "\n";
    return out.str();
  }

private:
  static std::vector<const CLI::App *> commandsOf(const CLI::App &app) {
    std::vector<const CLI::App *> out;
    for (const CLI::App *sub : app.get_subcommands(
             [](const CLI::App *s) { return !s->get_name().empty(); }))
      out.push_back(sub);
    return out;
  }

  static std::string summaryOf(const CLI::App &app) {
    auto house = std::dynamic_pointer_cast<HouseFormatter>(
        const_cast<CLI::App &>(app).get_formatter());
    return house ? house->text().summary : app.get_description();
  }

  static bool takesValue(const CLI::Option &o) {
    return o.get_type_size_max() > 0 && !o.get_type_name().empty();
  }

  static std::string positionalName(const CLI::Option &o) {
    return o.get_option_text().empty() ? o.get_name() : o.get_option_text();
  }

  // "-o, --out DIR", "--resume".
  static std::string namesOf(const CLI::Option &o) {
    std::string names;
    for (const std::string &s : o.get_snames())
      names += (names.empty() ? "-" : ", -") + s;
    for (const std::string &l : o.get_lnames())
      names += (names.empty() ? "--" : ", --") + l;
    if (takesValue(o))
      names += " " + o.get_type_name();
    return names;
  }

  // "[-o DIR]", "[--resume]": the option's first name and what it takes;
  // no brackets when it is required.
  static std::string usageItem(const CLI::Option &o) {
    std::string name = o.get_snames().empty() ? "--" + o.get_lnames().front()
                                              : "-" + o.get_snames().front();
    if (takesValue(o))
      name += " " + o.get_type_name();
    return o.get_group() == kRequiredGroup ? name : "[" + name + "]";
  }

  // "usage: octet compile SPEC [--train-spec FILE] ...", wrapped under the
  // first item.
  static std::string usage(const CLI::App &app) {
    // Positionals shown as "-- COMMAND..." (what follows -- is not the
    // tool's own) come after the options.
    std::vector<std::string> items, afterDashDash;
    for (const CLI::Option *o : app.get_options(
             [](const CLI::Option *o) { return o->get_positional(); })) {
      std::string name = positionalName(*o);
      (name.rfind("-- ", 0) == 0 ? afterDashDash : items).push_back(name);
    }
    if (!commandsOf(app).empty())
      items.push_back("<command> [options]");
    for (const CLI::Option *o : app.get_options([&](const CLI::Option *o) {
           return o->nonpositional() && !o->get_group().empty() &&
                  o != app.get_help_ptr() && o != app.get_version_ptr();
         }))
      items.push_back(usageItem(*o));
    items.insert(items.end(), afterDashDash.begin(), afterDashDash.end());
    std::string head = "usage: " + commandName(app);
    std::string out = head, line = head;
    for (const std::string &item : items) {
      if (line.size() + 1 + item.size() > kWidth && line.size() > head.size()) {
        out += "\n" + std::string(head.size(), ' ');
        line = std::string(head.size(), ' ');
      }
      out += " " + item;
      line += " " + item;
    }
    return out;
  }

  HelpText help_;
};

// The option's long name for messages ("--steps" of "-n,--steps").
std::string displayName(const std::string &names) {
  size_t comma = names.rfind(',');
  return comma == std::string::npos ? names : names.substr(comma + 1);
}

// Strict: digits with an optional sign, all of it, in range.
bool parseWhole(const std::string &text, int64_t &value, bool &tooLarge) {
  tooLarge = false;
  const char *begin = text.data(), *end = text.data() + text.size();
  if (begin != end && *begin == '+')
    ++begin;
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec == std::errc::result_out_of_range && ptr == end) {
    tooLarge = true;
    return false;
  }
  return begin != end && ec == std::errc() && ptr == end;
}

// `boundedAbove`: `most` is the option's own bound, not its type's, and
// the message says so.
CLI::Option *addWhole(CLI::App &app, const std::string &name,
                      std::function<void(int64_t)> set, int64_t least,
                      int64_t most, bool boundedAbove,
                      const std::string &help) {
  std::string flag = displayName(name);
  CLI::Option *option = app.add_option_function<std::string>(
      name,
      [flag, set, least, most, boundedAbove](const std::string &text) {
        int64_t value = 0;
        bool tooLarge = false;
        bool ok = parseWhole(text, value, tooLarge);
        if (ok && value >= least && value <= most) {
          set(value);
          return;
        }
        std::string takes = flag + " takes a whole number ";
        bool showMost = boundedAbove || tooLarge || (ok && value > most);
        takes += showMost ? "from " + std::to_string(least) + " to " +
                                std::to_string(most)
                          : "of at least " + std::to_string(least);
        throw CLI::ValidationError(takes + "; got '" + text + "'");
      },
      help);
  option->type_name("N");
  return option;
}

// CLI11's wording, in octet's: the option, then what it takes.
std::string rewrite(const CLI::ParseError &error, const CLI::App &where) {
  std::string message = error.what();
  if (dynamic_cast<const CLI::ArgumentMismatch *>(&error)) {
    // "--steps: 1 required N missing"
    size_t colon = message.find(": ");
    size_t required = message.find(" required ");
    size_t missing = message.rfind(" missing");
    if (colon != std::string::npos && required != std::string::npos &&
        missing != std::string::npos && missing > required)
      return message.substr(0, colon) + " needs a value (" +
             message.substr(required + 10, missing - required - 10) + ")";
    return message;
  }
  if (dynamic_cast<const CLI::ExtrasError *>(&error)) {
    // "The following argument was not expected: --frobnicate"
    size_t colon = message.find(": ");
    std::string first = colon == std::string::npos
                            ? message
                            : message.substr(colon + 2);
    first = first.substr(0, first.find(' '));
    if (!first.empty() && first[0] == '-')
      return "unknown option " + first.substr(0, first.find('='));
    return "unexpected argument '" + first + "'";
  }
  if (dynamic_cast<const CLI::RequiredError *>(&error) &&
      message.find("subcommand") != std::string::npos) {
    std::string names;
    for (const CLI::App *sub : where.get_subcommands(
             [](const CLI::App *s) { return !s->get_name().empty(); }))
      names += (names.empty() ? "" : ", ") + sub->get_name();
    std::vector<std::string> left = where.remaining();
    if (!left.empty() && !left.front().empty() && left.front()[0] != '-')
      return "unknown command '" + left.front() + "'; the commands: " + names;
    return "name a command: " + names;
  }
  return message;
}

const CLI::App &deepestSelected(const CLI::App &app) {
  const CLI::App *at = &app;
  while (!at->get_subcommands().empty())
    at = at->get_subcommands().front();
  return *at;
}

} // namespace

const char *version() { return OCTET_VERSION; }

Outcome Outcome::usageError(const std::string &command,
                            const std::string &message) {
  return Outcome(Kind::UsageError, command + ": " + message + " (see " +
                                       command + " --help)");
}

int Outcome::finish() const {
  switch (kind_) {
  case Kind::Run:
    return 0;
  case Kind::Exit:
    std::fputs(text_.c_str(), stdout);
    if (!text_.empty() && text_.back() != '\n')
      std::fputc('\n', stdout);
    return 0;
  case Kind::UsageError:
    std::fprintf(stderr, "%s\n", text_.c_str());
    return 2;
  }
  return 2;
}

void configure(CLI::App &app, HelpText help) {
  app.formatter(std::make_shared<HouseFormatter>(std::move(help)));
  app.set_help_flag("-h,--help", "this text");
  app.set_version_flag("--version", std::string("octet ") + version(),
                       "print octet's version and exit");
  // `--steps 3 --steps 5` is 5, as most tools do.
  app.option_defaults()->multi_option_policy(
      CLI::MultiOptionPolicy::TakeLast);
}

std::string commandName(const CLI::App &app) {
  std::string name = app.get_name();
  for (const CLI::App *at = app.get_parent(); at; at = at->get_parent())
    name = at->get_name() + " " + name;
  return name;
}

Outcome parse(CLI::App &app, std::vector<std::string> args) {
  std::reverse(args.begin(), args.end());
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp &) {
    return Outcome::exit(app.help());
  } catch (const CLI::CallForAllHelp &) {
    return Outcome::exit(app.help("", CLI::AppFormatMode::All));
  } catch (const CLI::CallForVersion &e) {
    return Outcome::exit(std::string(e.what()) + "\n");
  } catch (const CLI::ParseError &e) {
    const CLI::App &where = deepestSelected(app);
    return Outcome::usageError(commandName(where), rewrite(e, where));
  }
  return Outcome::run();
}

CLI::Option *addCount(CLI::App &app, const std::string &name, int64_t &out,
                      int64_t least, const std::string &help, int64_t most) {
  return addWhole(
      app, name, [&out](int64_t v) { out = v; }, least, most,
      most != std::numeric_limits<int64_t>::max(), help);
}

CLI::Option *addCount(CLI::App &app, const std::string &name, int &out,
                      int least, const std::string &help, int most) {
  return addWhole(
      app, name, [&out](int64_t v) { out = static_cast<int>(v); }, least,
      most, most != std::numeric_limits<int>::max(), help);
}

CLI::Option *addValue(CLI::App &app, const std::string &name,
                      std::string &out, const std::string &valueName,
                      const std::string &help) {
  return addValue(
      app, name, [&out](const std::string &text) { out = text; }, valueName,
      help);
}

CLI::Option *addValue(CLI::App &app, const std::string &name,
                      std::function<void(const std::string &)> set,
                      const std::string &valueName, const std::string &help) {
  std::string flag = displayName(name);
  CLI::Option *option = app.add_option_function<std::string>(
      name,
      [set, flag, valueName](const std::string &text) {
        if (text.empty())
          throw CLI::ValidationError(flag + " needs a value (" + valueName +
                                     ")");
        set(text);
      },
      help);
  option->type_name(valueName);
  return option;
}

CLI::Option *addChoice(CLI::App &app, const std::string &name,
                       std::string &out,
                       const std::vector<std::string> &choices,
                       const std::string &help) {
  std::string flag = displayName(name), list, typeName;
  for (size_t i = 0; i < choices.size(); ++i) {
    list += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") +
            choices[i];
    typeName += (i == 0 ? "" : "|") + choices[i];
  }
  CLI::Option *option = app.add_option_function<std::string>(
      name,
      [&out, flag, list, choices](const std::string &text) {
        if (std::find(choices.begin(), choices.end(), text) == choices.end())
          throw CLI::ValidationError(flag + " takes " + list + "; got '" +
                                     text + "'");
        out = text;
      },
      help);
  option->type_name(typeName);
  return option;
}

CLI::Option *addFlag(CLI::App &app, const std::string &name, bool &out,
                     const std::string &help) {
  return app.add_flag(name, out, help);
}

CLI::Option *addPositionals(CLI::App &app, const std::string &name,
                            std::vector<std::string> &out,
                            const std::string &help) {
  return app.add_option(name, out, help);
}

CLI::Option *required(CLI::Option *option) {
  return option->group(kRequiredGroup);
}

void addRetired(CLI::App &app, const std::string &name,
                const std::string &why) {
  CLI::Option *option = app.add_option(
      name,
      [why](const CLI::results_t &) -> bool {
        throw CLI::ValidationError(why);
      },
      "", false);
  // Takes its old value, if any, so that the message is about the option.
  option->expected(0, 1);
  option->group("");
}

bool pathExists(const std::string &path, PathKind kind) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0)
    return false;
  return kind == PathKind::Any ||
         (kind == PathKind::File ? S_ISREG(info.st_mode)
                                 : S_ISDIR(info.st_mode));
}

std::string missingIndexedDataset(const std::string &flag,
                                  const std::string &prefix) {
  for (const char *ext : {".bin", ".idx"})
    if (!pathExists(prefix + ext, PathKind::File))
      return flag + " " + prefix + ": " + prefix + ext +
             " not found (an indexed dataset PREFIX names PREFIX.bin and "
             "PREFIX.idx, written by `octet data preprocess`)";
  return "";
}

std::string onePositional(const std::vector<std::string> &values,
                          const std::string &name, const std::string &missing,
                          std::string &out) {
  if (values.empty())
    return missing;
  if (values.size() > 1)
    return "one " + name + " only; got '" + values[0] + "' and '" +
           values[1] + "'";
  out = values[0];
  return "";
}

} // namespace octet::cli
