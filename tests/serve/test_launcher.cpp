// tandem-serve's launcher flavors (launcher.h): the --version texts of Open MPI 4 and 5, MPICH's and
// Intel MPI's Hydra told apart, a stand-in that names neither taken for Open MPI, and each flavor's
// command up to tandem-train (Hydra refuses Open MPI's --oversubscribe).
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "apps/tandem-serve/launcher.h"
#include "runtime/error.h"

using tandem::serve::detect_flavor;
using tandem::serve::flavor_from_version;
using tandem::serve::launch_prefix;
using tandem::serve::LauncherFlavor;
using tandem::serve::parse_flavor;
using Argv = std::vector<std::string>;

TEST(ServeLauncher, VersionTexts) {
  LauncherFlavor f = LauncherFlavor::MPICH;
  EXPECT_TRUE(flavor_from_version("mpirun (Open MPI) 5.0.3\n\nReport bugs to https://www.open-mpi.org/community/help/", &f));
  EXPECT_EQ(f, LauncherFlavor::OpenMPI);
  f = LauncherFlavor::MPICH;
  EXPECT_TRUE(flavor_from_version("mpiexec (OpenRTE) 4.1.4\n", &f));
  EXPECT_EQ(f, LauncherFlavor::OpenMPI);
  EXPECT_TRUE(flavor_from_version("HYDRA build details:\n    Version:                                 4.0.2\n", &f));
  EXPECT_EQ(f, LauncherFlavor::MPICH);
  f = LauncherFlavor::OpenMPI;
  EXPECT_TRUE(flavor_from_version("Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619\n", &f));
  EXPECT_EQ(f, LauncherFlavor::MPICH);
  EXPECT_FALSE(flavor_from_version("true (GNU coreutils) 9.1\n", &f));
  EXPECT_FALSE(flavor_from_version("", &f));
}

TEST(ServeLauncher, ParseFlavor) {
  EXPECT_EQ(parse_flavor("openmpi"), LauncherFlavor::OpenMPI);
  EXPECT_EQ(parse_flavor("mpich"), LauncherFlavor::MPICH);
  EXPECT_THROW(parse_flavor("slurm"), tandem::ValueError);
}

TEST(ServeLauncher, CommandByFlavor) {
  EXPECT_EQ(launch_prefix(LauncherFlavor::OpenMPI, "/usr/bin/mpirun", 4, "/s/jobs/7/ranks"),
            (Argv{"/usr/bin/mpirun", "-np", "4", "--bind-to", "none", "--oversubscribe", "--output-filename",
                  "/s/jobs/7/ranks"}));
  EXPECT_EQ(launch_prefix(LauncherFlavor::MPICH, "/usr/bin/mpiexec.hydra", 2, "/s/jobs/7/ranks"),
            (Argv{"/usr/bin/mpiexec.hydra", "-np", "2"}));
}

// detect_flavor runs the launcher: stand-ins in a folder whose name has a space and a quote.
TEST(ServeLauncher, DetectRunsTheLauncher) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("serve launcher 'x' " + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto script = [&](const std::string& name, const std::string& says) {
    const fs::path p = dir / name;
    std::ofstream(p) << "#!/bin/sh\n[ \"$1\" = --version ] && printf '" << says << "\\n'\n";
    fs::permissions(p, fs::perms::owner_all);
    return p.string();
  };
  std::string why;
  EXPECT_EQ(detect_flavor(script("hydra", "HYDRA build details:"), &why), LauncherFlavor::MPICH);
  EXPECT_EQ(why, "mpich, from its --version");
  EXPECT_EQ(detect_flavor(script("ompi", "mpirun (Open MPI) 5.0.3"), &why), LauncherFlavor::OpenMPI);
  EXPECT_EQ(why, "openmpi, from its --version");
  EXPECT_EQ(detect_flavor(script("wrapper", "a site wrapper"), &why), LauncherFlavor::OpenMPI);
  EXPECT_NE(why.find("names neither"), std::string::npos) << why;
  EXPECT_EQ(detect_flavor((dir / "missing").string(), &why), LauncherFlavor::OpenMPI);
  fs::remove_all(dir);
}
