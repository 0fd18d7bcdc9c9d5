// The registry of TANDEM_* variables: each kind's spellings and its error for a bad value, the
// non-default listing, the warning for an unknown variable, and docs/environment.md's table.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "runtime/env_settings.h"
#include "runtime/error.h"

using namespace tandem;

namespace {

// The ValueError message of `read`, or "" when it does not throw one.
template <class F>
std::string error_of(F read) {
  try {
    read();
  } catch (const ValueError& e) {
    return e.what();
  }
  return "";
}

// A variable outside the table, set for one scope.
struct RawEnv {
  RawEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~RawEnv() { ::unsetenv(name_); }
  const char* name_;
};

}  // namespace

TEST(EnvSettings, FlagsTakeTheSameSpellingsEverywhere) {
  for (const char* name : {"TANDEM_DEBUG_DESYNC", "TANDEM_COMM_SHM"}) {
    for (const char* on : {"1", "on", "true"}) {
      env::ScopedValue v(name, on);
      EXPECT_TRUE(env::flag(name)) << name << "=" << on;
    }
    for (const char* off : {"0", "off", "false"}) {
      env::ScopedValue v(name, off);
      EXPECT_FALSE(env::flag(name)) << name << "=" << off;
    }
  }
  {
    env::ScopedValue unset("TANDEM_DEBUG_DESYNC", nullptr), shm("TANDEM_COMM_SHM", "");  // empty is unset
    EXPECT_FALSE(env::flag("TANDEM_DEBUG_DESYNC"));
    EXPECT_TRUE(env::flag("TANDEM_COMM_SHM"));  // its default is on
  }
  // Before, any value but "0" turned shared memory on: now a typo is an error, not "on".
  env::ScopedValue typo("TANDEM_COMM_SHM", "of");
  const std::string e = error_of([] { env::flag("TANDEM_COMM_SHM"); });
  EXPECT_NE(e.find("TANDEM_COMM_SHM=of: expected on or off (1, on, true / 0, off, false)"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean o"), std::string::npos) << e;
}

TEST(EnvSettings, ChoicesTakeTheirValuesAndNameThemForAnyOther) {
  {
    env::ScopedValue unset("TANDEM_SIMT_ORDER", nullptr);
    EXPECT_EQ(env::choice("TANDEM_SIMT_ORDER"), 0);
  }
  {
    env::ScopedValue reverse("TANDEM_SIMT_ORDER", "reverse");
    EXPECT_EQ(env::choice("TANDEM_SIMT_ORDER"), 1);
  }
  {
    env::ScopedValue shuffle("TANDEM_SIMT_ORDER", "shuffle");
    EXPECT_EQ(env::choice("TANDEM_SIMT_ORDER"), 2);
  }
  env::ScopedValue typo("TANDEM_SIMT_ORDER", "revers");
  const std::string e = error_of([] { env::choice("TANDEM_SIMT_ORDER"); });
  EXPECT_NE(e.find("TANDEM_SIMT_ORDER=revers: expected forward, reverse or shuffle (did you mean reverse?)"),
            std::string::npos)
      << e;
  EXPECT_EQ(e.find(".cpp:"), std::string::npos) << "a user's error with a source location: " << e;
  // The CPU GEMM's path used to ignore a value it did not know.
  env::ScopedValue gemm("TANDEM_CPU_GEMM", "eign");
  EXPECT_NE(error_of([] { env::choice("TANDEM_CPU_GEMM"); }).find("expected auto, eigen or avx512 (did you mean eigen?)"),
            std::string::npos);
}

TEST(EnvSettings, SizesNumbersAndPaths) {
  {
    env::ScopedValue cache("TANDEM_HOST_CACHE", "512MiB");
    EXPECT_EQ(env::size("TANDEM_HOST_CACHE").value_or(0), size_t(512) << 20);
  }
  {
    env::ScopedValue cache("TANDEM_HOST_CACHE", "lots");
    EXPECT_NE(error_of([] { env::size("TANDEM_HOST_CACHE"); }).find("TANDEM_HOST_CACHE=lots: not a size"),
              std::string::npos);
  }
  {
    env::ScopedValue timeout("TANDEM_COMM_TIMEOUT", "2.5");
    EXPECT_EQ(env::number("TANDEM_COMM_TIMEOUT").value_or(0), 2.5);
  }
  for (const char* bad : {"-1", "0", "5s", "soon"}) {
    env::ScopedValue timeout("TANDEM_COMM_TIMEOUT", bad);
    EXPECT_NE(error_of([] { env::number("TANDEM_COMM_TIMEOUT"); })
                  .find(std::string("TANDEM_COMM_TIMEOUT=") + bad + ": expected a positive number"),
              std::string::npos)
        << bad;
  }
  {
    env::ScopedValue unset("TANDEM_COMM_TIMEOUT", nullptr);
    EXPECT_FALSE(env::number("TANDEM_COMM_TIMEOUT").has_value());
  }
  {
    env::ScopedValue dir("TANDEM_FLIGHT_DIR", "/tmp/flights");
    EXPECT_EQ(env::text("TANDEM_FLIGHT_DIR").value_or(""), "/tmp/flights");
  }
  env::ScopedValue dir("TANDEM_FLIGHT_DIR", "");
  EXPECT_FALSE(env::text("TANDEM_FLIGHT_DIR").has_value());
}

TEST(EnvSettings, ASwitchFollowsAScopedValueAndCanFallBackToItsDefault) {
  const env::Switch order("TANDEM_SIMT_ORDER");
  {
    env::ScopedValue shuffle("TANDEM_SIMT_ORDER", "shuffle");
    EXPECT_EQ(order.index(), 2);
  }
  env::ScopedValue bad("TANDEM_SIMT_ORDER", "sideways");
  EXPECT_THROW(order.index(), ValueError);
  EXPECT_EQ(order.index_or_default(), 0);
  EXPECT_THROW(env::Switch("TANDEM_NO_SUCH_SWITCH"), Error);  // not declared: our bug
}

TEST(EnvSettings, CheckListsEveryBadValue) {
  env::ScopedValue algo("TANDEM_COMM_ALGO", "tree"), adam("TANDEM_ADAM", "fused");
  const std::string e = error_of([] { env::check(); });
  EXPECT_NE(e.find("TANDEM_COMM_ALGO=tree: expected auto, ring, hierarchical or native"), std::string::npos) << e;
  EXPECT_NE(e.find("TANDEM_ADAM=fused: expected multi-tensor or per-tensor"), std::string::npos) << e;
}

TEST(EnvSettings, NonDefaultListsOnlyValuesOtherThanTheDefaults) {
  env::ScopedValue sums("TANDEM_COLUMN_SUMS", "two-pass"), shm("TANDEM_COMM_SHM", "true"),
      cache("TANDEM_HOST_CACHE", "1073741824"), timeout("TANDEM_COMM_TIMEOUT", "60"),
      ce("TANDEM_CE_GRAD", "forward");
  const auto listed = env::non_default();
  auto value_of = [&](const std::string& name) -> std::string {
    for (const auto& [n, v] : listed)
      if (n == name) return v;
    return "(not listed)";
  };
  EXPECT_EQ(value_of("TANDEM_COLUMN_SUMS"), "two-pass");
  EXPECT_EQ(value_of("TANDEM_COMM_TIMEOUT"), "60");
  EXPECT_EQ(value_of("TANDEM_COMM_SHM"), "(not listed)");     // true is on, the default
  EXPECT_EQ(value_of("TANDEM_HOST_CACHE"), "(not listed)");   // 1 GiB spelt in bytes
  EXPECT_EQ(value_of("TANDEM_CE_GRAD"), "(not listed)");      // the first value
}

TEST(EnvSettings, UnknownVariablesAreNamedWithASuggestion) {
  RawEnv typo("TANDEM_COMM_SHMM", "0"), far("TANDEM_ZZZ_NOTHING_LIKE_IT", "1"), retired("TANDEM_GEMM_DGELU", "ours");
  env::ScopedValue known("TANDEM_COMM_SHM", "0");
  std::string all;
  for (const std::string& line : env::unknown_variables()) all += line + "\n";
  EXPECT_NE(all.find("TANDEM_COMM_SHMM is not a variable tandem reads (did you mean TANDEM_COMM_SHM?)"),
            std::string::npos) << all;
  EXPECT_NE(all.find("TANDEM_ZZZ_NOTHING_LIKE_IT is not a variable tandem reads; docs/environment.md"),
            std::string::npos) << all;
  EXPECT_NE(all.find("TANDEM_GEMM_DGELU is no longer read: retired"), std::string::npos) << all;
  EXPECT_EQ(all.find("TANDEM_COMM_SHM "), std::string::npos) << all;  // declared: not warned about
}

TEST(EnvSettings, EveryVariableIsDeclaredOnceWithADoc) {
  std::set<std::string> names;
  for (const env::Variable& v : env::variables()) {
    EXPECT_TRUE(names.insert(v.name).second) << v.name << " declared twice";
    EXPECT_EQ(std::string(v.name).rfind("TANDEM_", 0), 0u) << v.name;
    EXPECT_NE(std::string(v.doc), "") << v.name;
    EXPECT_EQ(v.kind == env::Kind::Choice, !v.values.empty()) << v.name;
    if (v.kind == env::Kind::Choice) {
      EXPECT_STREQ(v.values[0], v.fallback) << v.name << ": the default comes first";
    }
  }
}

// docs/environment.md's table is markdown_table() (TANDEM_UPDATE_DOCS=1 rewrites the doc's copy).
TEST(EnvSettings, DocsTableIsTheRegistrys) {
  const std::string path = std::string(TANDEM_SOURCE_DIR) + "/docs/environment.md";
  const std::string begin = "<!-- BEGIN variables: generated by env::markdown_table(), do not edit -->\n";
  const std::string end = "<!-- END variables -->";
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in.good()) << "cannot open " << path;
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const size_t b = doc.find(begin), e = doc.find(end);
  ASSERT_NE(b, std::string::npos) << path << " has no '" << begin << "'";
  ASSERT_NE(e, std::string::npos) << path << " has no '" << end << "'";
  const std::string table = doc.substr(b + begin.size(), e - b - begin.size());
  const std::string expected = env::markdown_table();
  if (table != expected && env::flag("TANDEM_UPDATE_DOCS")) {
    std::ofstream(path, std::ios::binary) << doc.substr(0, b + begin.size()) << expected << doc.substr(e);
    GTEST_SKIP() << "rewrote the table of " << path;
  }
  EXPECT_EQ(table, expected) << path << "'s table is not runtime/env_settings.cpp's; rerun with "
                             << "TANDEM_UPDATE_DOCS=1 to rewrite it";
}
