// tandem-serve's confinement of a job's files to --models-dir and --data-dir (job_paths.h): the
// names it takes, the ones it refuses and why, on a folder tree of files and symlinks made here.
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "apps/tandem-serve/http_error.h"
#include "apps/tandem-serve/job_paths.h"
#include "runtime/error.h"

namespace fs = std::filesystem;
using tandem::serve::canonical_folder;
using tandem::serve::confined_file;
using tandem::serve::FileRoots;
using tandem::serve::HttpError;
using tandem::serve::resolve_job_files;

namespace {

void touch(const fs::path& p) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << "x";
}

// <tmp>/models: a.onnx, sub/b.onnx, a folder dir.onnx/, and symlinks: alias.onnx -> sub/b.onnx
// (inside), out.onnx -> ../outside.onnx, evil.onnx -> ../models-evil/x.onnx (a folder whose name
// starts with the root's), up -> .. (a folder link out), loop.onnx -> itself, dangling.onnx.
class JobPaths : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tandem_job_paths_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    tmp_ = tmpl;
    const fs::path m = tmp_ / "models";
    touch(m / "a.onnx");
    touch(m / "sub" / "b.onnx");
    fs::create_directories(m / "dir.onnx");
    touch(tmp_ / "outside.onnx");
    touch(tmp_ / "models-evil" / "x.onnx");
    touch(tmp_ / "data" / "train.npz");
    fs::create_symlink("sub/b.onnx", m / "alias.onnx");
    fs::create_symlink("../outside.onnx", m / "out.onnx");
    fs::create_symlink("../models-evil/x.onnx", m / "evil.onnx");
    fs::create_symlink("..", m / "up");
    fs::create_symlink("loop.onnx", m / "loop.onnx");
    fs::create_symlink("nowhere.onnx", m / "dangling.onnx");
    fs::create_directory_symlink(m, tmp_ / "models-link");
    root_ = canonical_folder("--models-dir", m.string());
  }
  void TearDown() override { fs::remove_all(tmp_); }

  // The refusal of `given`: a 400 naming the field, with `needle` in its message, and never the
  // server's own path (unless the client sent it).
  void expect_refused(const std::string& given, const std::string& needle) {
    try {
      confined_file(root_, given, "model", "the models folder");
      FAIL() << "'" << given << "' was accepted";
    } catch (const HttpError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.field(), "model");
      const std::string what = e.what();
      EXPECT_NE(what.find(needle), std::string::npos) << what;
      if (given.find(tmp_.string()) == std::string::npos) {
        EXPECT_EQ(what.find(tmp_.string()), std::string::npos) << "the server's path in: " << what;
      }
    }
  }

  fs::path tmp_;
  std::string root_;
};

TEST_F(JobPaths, FilesInsideResolveToTheirRealPaths) {
  EXPECT_EQ(confined_file(root_, "a.onnx", "model", "the models folder"), root_ + "/a.onnx");
  EXPECT_EQ(confined_file(root_, "sub/b.onnx", "model", "the models folder"), root_ + "/sub/b.onnx");
  EXPECT_EQ(confined_file(root_, "./sub//b.onnx", "model", "the models folder"), root_ + "/sub/b.onnx");
  // A symlink that stays inside is followed: tandem-train gets the file it points to.
  EXPECT_EQ(confined_file(root_, "alias.onnx", "model", "the models folder"), root_ + "/sub/b.onnx");
}

TEST_F(JobPaths, AFolderGivenThroughASymlinkIsItsRealPath) {
  EXPECT_EQ(canonical_folder("--models-dir", (tmp_ / "models-link").string()), root_);
  EXPECT_THROW(canonical_folder("--models-dir", (tmp_ / "no-such").string()), tandem::ValueError);
  EXPECT_THROW(canonical_folder("--models-dir", (tmp_ / "outside.onnx").string()), tandem::ValueError);
}

TEST_F(JobPaths, NamesThatAreNotPlainRelativeOnesAreRefused) {
  expect_refused("", "empty file name");
  expect_refused(std::string("a\0b.onnx", 8), "NUL");
  expect_refused((tmp_ / "outside.onnx").string(), "is an absolute path");
  expect_refused(root_ + "/a.onnx", "is an absolute path");  // even a path inside the folder
  expect_refused("../outside.onnx", "'..'");
  expect_refused("sub/../a.onnx", "'..'");  // back inside, but named the way out
  expect_refused("..", "'..'");
}

TEST_F(JobPaths, RealPathsOutsideTheFolderAreRefused) {
  expect_refused("out.onnx", "resolves outside the models folder");
  expect_refused("evil.onnx", "resolves outside the models folder");  // not inside, though a prefix
  expect_refused("up/outside.onnx", "resolves outside the models folder");
}

TEST_F(JobPaths, MissingAndOddFilesAreRefused) {
  expect_refused("missing.onnx", "no file 'missing.onnx' in the models folder");
  expect_refused("dangling.onnx", "no file 'dangling.onnx'");
  expect_refused("dir.onnx", "is not a file");
  expect_refused(".", "is not a file");
  expect_refused("loop.onnx", "cannot be resolved");
  expect_refused("a.onnx/b.onnx", "cannot be resolved");  // a file used as a folder
}

TEST_F(JobPaths, ARequestsFilesNeedTheServersFolders) {
  const nlohmann::json job = {{"model", "a.onnx"}, {"data", "train.npz"}, {"val_data", "train.npz"}};
  try {
    resolve_job_files(job, FileRoots{});
    FAIL() << "a model file accepted without --models-dir";
  } catch (const HttpError& e) {
    EXPECT_EQ(e.field(), "model");
    EXPECT_NE(std::string(e.what()).find("--models-dir"), std::string::npos) << e.what();
  }
  try {
    resolve_job_files(job, FileRoots{root_, ""});
    FAIL() << "an array file accepted without --data-dir";
  } catch (const HttpError& e) {
    EXPECT_EQ(e.field(), "data");
    EXPECT_NE(std::string(e.what()).find("--data-dir"), std::string::npos) << e.what();
  }
  const std::string data = canonical_folder("--data-dir", (tmp_ / "data").string());
  const auto files = resolve_job_files(job, FileRoots{root_, data});
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files.at("model"), root_ + "/a.onnx");
  EXPECT_EQ(files.at("data"), data + "/train.npz");
  EXPECT_EQ(files.at("val_data"), data + "/train.npz");
  // The data folder is the root of data and val_data; the models folder is not.
  try {
    resolve_job_files({{"data", "a.onnx"}}, FileRoots{root_, data});
    FAIL() << "data read from the models folder";
  } catch (const HttpError& e) {
    EXPECT_EQ(e.field(), "data");
    EXPECT_NE(std::string(e.what()).find("no file 'a.onnx' in the data folder"), std::string::npos) << e.what();
  }
}

TEST_F(JobPaths, RegisteredModelsNameNoFile) {
  EXPECT_TRUE(resolve_job_files({{"model", "mlp"}, {"epochs", 1}}, FileRoots{}).empty());
  EXPECT_TRUE(resolve_job_files({{"model", ".onnx"}}, FileRoots{}).empty());  // as tandem-train reads it
}

}  // namespace
