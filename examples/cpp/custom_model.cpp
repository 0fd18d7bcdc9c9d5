// Your own model on your own arrays, trained by tandem's engine with DDP, checkpointed and resumed:
//   mpirun -np 2 custom_model [STEPS] [--save DIR] [--resume DIR/step-N]
// prints the test accuracy and a hash of the weights (a resumed run ends with the uninterrupted one's).
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <tandem/tandem.h>

using namespace tandem;

// Children in members, built in reset() (called by the constructor and by clone()): a clone, e.g. a
// DataParallel replica, gets its own.
struct SpiralNet : nn::Cloneable<SpiralNet> {
  std::shared_ptr<nn::Linear> in, hidden, out;
  SpiralNet() { reset(); }
  void reset() override {
    in = register_module("in", std::make_shared<nn::Linear>(2, 64));
    hidden = register_module("hidden", std::make_shared<nn::Linear>(64, 64));
    out = register_module("out", std::make_shared<nn::Linear>(64, 3));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = ops::relu(in->forward(x));
    return out->forward(ops::relu(ops::add(h, hidden->forward(h))));  // a residual block
  }
  std::string type_name() const override { return "SpiralNet"; }
};

// n points on three interleaved spirals: x [n, 2] (f32), y [n] (the arm, i64).
void spirals(int64_t n, uint64_t seed, Tensor& x, Tensor& y) {
  Generator gen(seed);
  const std::vector<float> noise = rand_uniform({n}, -0.1, 0.1, gen).to_vector<float>();
  std::vector<float> xs;
  std::vector<int64_t> ys;
  for (int64_t i = 0; i < n; ++i) {
    const float r = static_cast<float>(i % 100) / 100.0f, a = 4.0f * r + 2.0944f * (i % 3) + noise[i];
    xs.insert(xs.end(), {r * std::cos(a), r * std::sin(a)});
    ys.push_back(i % 3);
  }
  x = Tensor::from_vector(xs, {n, 2});
  y = Tensor::from_vector(ys, {n}, DType::i64);
}

int run(int argc, char** argv) {
  train::TrainConfig cfg;  // the engine's settings (tandem-train's flags fill the same struct)
  cfg.model.type = "spiral_net";  // for the log and the checkpoint's check
  cfg.max_steps = argc > 1 && argv[1][0] != '-' ? std::stoll(argv[1]) : 300;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--save") cfg.save_dir = argv[i + 1];
    if (std::string(argv[i]) == "--resume") cfg.resume_dir = argv[i + 1];
  }
  cfg.epochs = 1000, cfg.batch_size = 32, cfg.save_every = cfg.save_dir.empty() ? 0 : 50;
  cfg.optimizer.type = nn::config::OptimizerType::Adam, cfg.optimizer.learning_rate = 1e-2, cfg.optimizer.weight_decay = 0;
  auto comm = comm::make_mpi_communicator(MPI_COMM_WORLD);
  train::ParallelSetup ps = train::setup_parallel({}, std::make_shared<SpiralNet>(), comm);  // ddp on > 1 rank
  Tensor x, y, x_test, y_test;
  spirals(3000, 1, x, y);
  spirals(600, 2, x_test, y_test);
  const train::World world{ps.comm};
  train::FullTrainer trainer(cfg, ps, train::make_optimizer(cfg, ps.model->parameters()),
                             train::tensor_batches(cfg, x, y, world, true),
                             train::tensor_batches(cfg, x_test, y_test, world, false));
  if (!cfg.resume_dir.empty()) trainer.resume(cfg.resume_dir);
  const train::TrainResult r = trainer.fit();
  if (ps.rank() == 0)
    std::printf("custom_model: %d ranks, %lld steps, test accuracy %.4f, param_hash %s\n", ps.world_size(),
                static_cast<long long>(r.steps), r.test_acc, trainer.param_hash().c_str());
  return 0;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  try {
    run(argc, argv);
  } catch (const Error& e) {  // tandem's errors say what to change
    std::fprintf(stderr, "custom_model: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
}
