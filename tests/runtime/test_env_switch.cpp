// env_switch: the GPU sessions' A/B switches read one of their named ways from the environment.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "runtime/backend/env_switch.h"
#include "runtime/error.h"

using namespace tandem;

TEST(EnvSwitch, UnsetOrEmptyIsTheFirstWayAndEachNameItsIndex) {
  const char* name = "TANDEM_TEST_ENV_SWITCH";
  unsetenv(name);
  EXPECT_EQ(env_switch(name, {"on", "leaves", "off"}), 0);
  setenv(name, "", 1);
  EXPECT_EQ(env_switch(name, {"on", "leaves", "off"}), 0);
  setenv(name, "off", 1);
  EXPECT_EQ(env_switch(name, {"on", "leaves", "off"}), 2);
  setenv(name, "leaves", 1);
  EXPECT_EQ(env_switch(name, {"on", "leaves", "off"}), 1);
  setenv(name, "leafs", 1);  // a typo is an error, not the default
  try {
    env_switch(name, {"on", "leaves", "off"});
    ADD_FAILURE() << "no error for a value that is not a way";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("TANDEM_TEST_ENV_SWITCH=leafs: expected on, leaves or off"), std::string::npos)
        << e.what();
  }
  unsetenv(name);
}
