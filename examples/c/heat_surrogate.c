/* A simulation that trains its own surrogate online: an explicit 1-D heat solver on a periodic rod,
 * split into one slab per MPI rank (halos exchanged with the host's own MPI calls on MPI_COMM_WORLD),
 * hands every few solver steps the (stencil -> next value) pairs it just produced to a tandem model
 * that trains data-parallel on a communicator split from the world. At the end the surrogate
 * predicts the next state from the current one, and its error against the solver is printed.
 *
 *   mpirun -np 2 ./heat_surrogate heat_surrogate.yaml [steps]
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include <tandem/tandem_c.h>

#define CELLS 256      /* per rank */
#define TRAIN_EVERY 4  /* solver steps between training steps */

/* Report a failed tandem call and stop every rank (the host owns MPI, so it is the host that aborts). */
static void check(tandem_result_t rc, const char* what) {
  if (rc == TANDEM_SUCCESS) return;
  fprintf(stderr, "%s failed (%d): %s\n", what, (int)rc, tandem_last_error());
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/* u[0] and u[CELLS + 1] are halos: the neighbours' edge cells (periodic). */
static void exchange_halos(double* u, int left, int right) {
  MPI_Sendrecv(&u[1], 1, MPI_DOUBLE, left, 0, &u[CELLS + 1], 1, MPI_DOUBLE, right, 0, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  MPI_Sendrecv(&u[CELLS], 1, MPI_DOUBLE, right, 1, &u[0], 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

static void solver_step(const double* u, double* next) {
  const double r = 0.25; /* alpha dt / dx^2: stable below 0.5 */
  for (int i = 1; i <= CELLS; ++i) next[i] = u[i] + r * (u[i - 1] - 2.0 * u[i] + u[i + 1]);
}

/* The training pairs of one step: x [CELLS, 3] (stencils), y [CELLS, 1] (next values). */
static void pairs(const double* u, const double* next, float* x, float* y) {
  for (int i = 1; i <= CELLS; ++i) {
    x[3 * (i - 1)] = (float)u[i - 1];
    x[3 * (i - 1) + 1] = (float)u[i];
    x[3 * (i - 1) + 2] = (float)u[i + 1];
    y[i - 1] = (float)next[i];
  }
}

/* Root-mean-square error of the surrogate's next state against the solver's, over all ranks. */
static double surrogate_error(tandem_model_t model, const double* u, const double* next, float* x, float* y) {
  float pred[CELLS];
  const int64_t xs[2] = {CELLS, 3}, ys[2] = {CELLS, 1};
  pairs(u, next, x, y);
  check(tandem_inference(model, x, TANDEM_FLOAT32, 2, xs, pred, TANDEM_FLOAT32, 2, ys), "tandem_inference");
  double local = 0.0, total = 0.0;
  for (int i = 0; i < CELLS; ++i) local += (pred[i] - y[i]) * (double)(pred[i] - y[i]);
  MPI_Allreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return sqrt(total / (CELLS * (double)size));
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv); /* MPI_THREAD_SINGLE: tandem works at any level */
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 2) {
    if (rank == 0) fprintf(stderr, "usage: %s CONFIG.yaml [steps]\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  const int steps = argc > 2 ? atoi(argv[2]) : 400;
  const int left = (rank + size - 1) % size, right = (rank + 1) % size;

  /* The surrogate trains on a communicator of its own, split from the world the solver uses. */
  MPI_Comm train_comm;
  MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &train_comm);
  tandem_model_t model = NULL;
  check(tandem_model_create_distributed(&model, argv[1], train_comm, "cpu"), "tandem_model_create_distributed");

  double u[CELLS + 2], next[CELLS + 2];
  const double pi = 3.14159265358979323846, length = (double)CELLS * size;
  for (int i = 1; i <= CELLS; ++i) {
    const double s = (double)(rank * CELLS + i - 1) / length;
    u[i] = sin(2 * pi * s) + 0.5 * sin(6 * pi * s + 1.0) + 0.25 * cos(10 * pi * s);
  }
  static float x[CELLS * 3], y[CELLS];
  const int64_t xs[2] = {CELLS, 3}, ys[2] = {CELLS, 1};

  exchange_halos(u, left, right);
  solver_step(u, next);
  const double before = surrogate_error(model, u, next, x, y);
  float loss = 0.0f;
  for (int n = 0; n < steps; ++n) {
    exchange_halos(u, left, right);
    solver_step(u, next);
    if (n % TRAIN_EVERY == 0) {
      pairs(u, next, x, y);
      check(tandem_train(model, x, TANDEM_FLOAT32, 2, xs, y, TANDEM_FLOAT32, 2, ys, &loss), "tandem_train");
    }
    for (int i = 1; i <= CELLS; ++i) u[i] = next[i];
  }
  exchange_halos(u, left, right);
  solver_step(u, next);
  const double after = surrogate_error(model, u, next, x, y);
  if (rank == 0)
    printf("heat_surrogate: %d ranks, %d solver steps, %d training steps: surrogate rms error %.3e before, "
           "%.3e after\n", size, steps, (steps + TRAIN_EVERY - 1) / TRAIN_EVERY, before, after);
  check(tandem_model_destroy(model), "tandem_model_destroy");
  MPI_Comm_free(&train_comm);
  MPI_Finalize();
  return after < before ? 0 : 3;
}
