// A training loop of your own on tandem's C++ API: a small mlp learns y = sin(x0) * cos(x1) from
// samples each rank draws itself, with DistributedDataParallel over MPI (any number of ranks, one
// works too), Adam, an LR warmup, bf16 autocast and gradient clipping. Prints the loss on a fixed
// held-out set before and after, and exits non-zero when it did not fall.
//   mpirun -np 2 ./train_ddp [steps]
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

#include <tandem/tandem.h>

using namespace tandem;

namespace {

// n samples of the target function: x [n, 2] uniform in [-2, 2], y [n, 1].
void make_batch(Generator& gen, int64_t n, Tensor& x, Tensor& y) {
  x = rand_uniform({n, 2}, -2.0, 2.0, gen);
  std::vector<float> xs = x.to_vector<float>(), ys(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ys[i] = std::sin(xs[2 * i]) * std::cos(xs[2 * i + 1]);
  y = Tensor::from_vector(ys, {n, 1});
}

double held_out_loss(nn::Module& model, const Tensor& x, const Tensor& y) {
  NoGradGuard no_grad;
  return ops::mse_loss(model.forward(x), y).item();
}

int run(int steps) {
  auto comm = comm::make_mpi_communicator(MPI_COMM_WORLD);
  Generator init(42);  // the same initial weights everywhere (DDP broadcasts rank 0's anyway)
  auto mlp = std::make_shared<nn::Sequential>();
  mlp->emplace_back<nn::Linear>(2, 64, true, init);
  mlp->emplace_back<nn::GELU>();
  mlp->emplace_back<nn::Linear>(64, 64, true, init);
  mlp->emplace_back<nn::GELU>();
  mlp->emplace_back<nn::Linear>(64, 1, true, init);
  nn::parallel::DDPOptions ddp_options;
  ddp_options.bucket_cap_mb = 1.0;
  auto model = std::make_shared<nn::parallel::DistributedDataParallel>(mlp, comm, ddp_options);

  nn::AdamOptions adam;
  adam.lr = 1e-2;
  nn::Adam optimizer(model->parameters(), adam);
  nn::LinearWarmup warmup(optimizer, /*warmup_steps=*/20);

  Generator data(1000 + static_cast<uint64_t>(comm->rank()));  // each rank its own samples
  Generator held(7);
  Tensor x_test, y_test;
  make_batch(held, 512, x_test, y_test);
  const double before = held_out_loss(*mlp, x_test, y_test);

  for (int step = 0; step < steps; ++step) {
    Tensor x, y;
    make_batch(data, 64, x, y);
    Tensor loss;
    {
      AutocastGuard autocast(DType::bf16);  // linear layers in bf16, the loss in f32
      loss = ops::mse_loss(model->forward(x), y);
    }
    optimizer.zero_grad();
    loss.backward();  // gradients are averaged over the ranks when this returns
    nn::clip_grad_norm(model->parameters(), 1.0);
    optimizer.step();
    warmup.step();
  }
  const double after = held_out_loss(*mlp, x_test, y_test);
  if (comm->rank() == 0)
    std::printf("tandem %s, %d rank(s): held-out mse %.5f before, %.5f after %d steps\n", tandem::version(),
                comm->size(), before, after, steps);
  return after < 0.5 * before ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rc = 0;
  try {
    rc = run(argc > 1 ? std::atoi(argv[1]) : 300);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_ddp: %s\n", e.what());
    rc = 1;
  }
  int worst = rc;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
