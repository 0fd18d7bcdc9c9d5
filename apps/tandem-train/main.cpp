// tandem-train: trains the Fashion-MNIST mlp or cnn and reports test accuracy, throughput and
// peak memory (console lines from rank 0, JSON-lines metrics with --metrics).
#include <CLI/CLI.hpp>

#include "apps/common/cli.h"
#include "apps/common/factory.h"
#include "apps/common/host_memory.h"
#include "apps/common/trainer.h"
#include "runtime/data/dataset.h"

using namespace tandem;

int main(int argc, char** argv) {
  app::TrainConfig cfg;
  CLI::App cli{"tandem-train: data-parallel training of a Fashion-MNIST classifier", "tandem-train"};
  app::add_train_flags(cli, cfg);
  if (auto rc = app::parse_cli(cli, argc, argv)) return *rc;

  return app::run_guarded("tandem-train", [&] {
    app::keep_freed_host_memory();
    int threads = app::apply_threads(cfg.threads);
    // One process for now; a DDP mode sets world.comm (comm::make_mpi_communicator()) and wraps the model.
    app::World world;
    app::Logger log(world.rank(), cfg.quiet);
    log.info("tandem-train: model {}, optimizer {} (lr {}, momentum {}, weight decay {}), {} epochs, {} thread{}",
             cfg.model, cfg.optimizer, cfg.lr, cfg.momentum, cfg.weight_decay, cfg.epochs, threads,
             threads > 1 ? "s" : "");
    data::Dataset train = data::load_fashion_mnist(cfg.data_dir, data::Split::Train);
    data::Dataset test = data::load_fashion_mnist(cfg.data_dir, data::Split::Test);
    auto model = app::make_model(cfg);
    auto optimizer = app::make_optimizer(cfg, model->parameters());
    app::Trainer trainer(cfg, model, std::move(optimizer), train, test, world);
    app::TrainResult r = trainer.fit();
    if (r.evaluated)
      log.result("test accuracy {:.4f} ({} epochs, {} steps, {:.0f} samples/s)", r.test_acc, r.epochs, r.steps,
                 r.samples_per_s);
    else
      log.result("done: {} epochs, {} steps, {:.0f} samples/s (no evaluation)", r.epochs, r.steps, r.samples_per_s);
    return 0;
  });
}
