! The Fortran twin of examples/c/heat_surrogate.c: an explicit 1-D heat solver on a periodic rod, one
! slab per MPI rank (halos exchanged with mpi_f08 on MPI_COMM_WORLD), trains a tandem surrogate
! (stencil at step n -> value at step n+1) online on a communicator split from the world, then prints
! the surrogate's error against the solver before and after.
!   mpirun -np 2 ./heat_surrogate_f heat_surrogate.yaml [steps]
program heat_surrogate
  use, intrinsic :: iso_fortran_env, only: real32, real64, error_unit
  use mpi_f08
  use tandem
  implicit none
  integer, parameter :: cells = 256, train_every = 4
  real(real64), parameter :: pi = 3.14159265358979323846_real64, r = 0.25_real64
  type(MPI_Comm) :: train_comm
  type(tandem_model) :: model
  real(real64) :: u(0:cells + 1), next(0:cells + 1), before, after, s
  real(real32) :: x(3, cells), y(1, cells), loss  ! the batch is the last dimension
  integer :: rank, nranks, left, right, i, n, steps
  character(len=256) :: config, arg

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks)
  if (command_argument_count() < 1) then
    if (rank == 0) write(error_unit, '(a)') 'usage: heat_surrogate_f CONFIG.yaml [steps]'
    call MPI_Finalize()
    stop 2
  end if
  call get_command_argument(1, config)
  steps = 400
  if (command_argument_count() > 1) then
    call get_command_argument(2, arg)
    read(arg, *) steps
  end if
  left = modulo(rank - 1, nranks)
  right = modulo(rank + 1, nranks)

  ! The surrogate trains on a communicator of its own; the solver keeps MPI_COMM_WORLD.
  call MPI_Comm_split(MPI_COMM_WORLD, 0, rank, train_comm)
  call check(tandem_model_create_distributed(model, config, train_comm, 'cpu'), 'tandem_model_create_distributed')

  do i = 1, cells
    s = real(rank * cells + i - 1, real64) / real(cells * nranks, real64)
    u(i) = sin(2 * pi * s) + 0.5_real64 * sin(6 * pi * s + 1) + 0.25_real64 * cos(10 * pi * s)
  end do

  call exchange_halos()
  call solver_step()
  before = surrogate_error()
  do n = 0, steps - 1
    call exchange_halos()
    call solver_step()
    if (modulo(n, train_every) == 0) then
      call make_pairs()
      call check(tandem_train(model, x, y, loss), 'tandem_train')
    end if
    u(1:cells) = next(1:cells)
  end do
  call exchange_halos()
  call solver_step()
  after = surrogate_error()
  if (rank == 0) write(*, '(a, i0, a, i0, a, es10.3, a, es10.3, a)') 'heat_surrogate_f: ', nranks, ' ranks, ', &
      steps, ' solver steps: surrogate rms error ', before, ' before, ', after, ' after'
  call check(tandem_model_destroy(model), 'tandem_model_destroy')
  call MPI_Comm_free(train_comm)
  call MPI_Finalize()
  if (.not. (after < before)) stop 3

contains

  subroutine check(res, what)
    integer, intent(in) :: res
    character(len=*), intent(in) :: what
    if (res == TANDEM_SUCCESS) return
    write(error_unit, '(a, a, i0, a, a)') what, ' failed (', res, '): ', tandem_last_error()
    call MPI_Abort(MPI_COMM_WORLD, 1)
  end subroutine check

  subroutine exchange_halos()
    call MPI_Sendrecv(u(1), 1, MPI_DOUBLE_PRECISION, left, 0, u(cells + 1), 1, MPI_DOUBLE_PRECISION, right, 0, &
                      MPI_COMM_WORLD, MPI_STATUS_IGNORE)
    call MPI_Sendrecv(u(cells), 1, MPI_DOUBLE_PRECISION, right, 1, u(0), 1, MPI_DOUBLE_PRECISION, left, 1, &
                      MPI_COMM_WORLD, MPI_STATUS_IGNORE)
  end subroutine exchange_halos

  subroutine solver_step()
    next(1:cells) = u(1:cells) + r * (u(0:cells - 1) - 2 * u(1:cells) + u(2:cells + 1))
  end subroutine solver_step

  subroutine make_pairs()
    x(1, :) = real(u(0:cells - 1), real32)
    x(2, :) = real(u(1:cells), real32)
    x(3, :) = real(u(2:cells + 1), real32)
    y(1, :) = real(next(1:cells), real32)
  end subroutine make_pairs

  function surrogate_error() result(rms)
    real(real64) :: rms, local, total
    real(real32) :: pred(1, cells)
    call make_pairs()
    call check(tandem_inference(model, x, pred), 'tandem_inference')
    local = sum(real(pred - y, real64)**2)
    call MPI_Allreduce(local, total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD)
    rms = sqrt(total / real(cells * nranks, real64))
  end function surrogate_error

end program heat_surrogate
