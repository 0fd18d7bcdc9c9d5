! The multi-argument calls through the Fortran module: two_io.onnx (inputs a(5, B) and b(2, B),
! outputs y1 and y2) trained towards constant targets with tandem_train_multiarg (the loss, summed
! over the two outputs, falls to under a third), then tandem_inference_multiarg fills both outputs,
! whose mse against the targets must be the last loss's order. Exits 1 with a message otherwise.
!   fortran_multiarg CONFIG_FILE (model: {type: onnx, parameters: {filename: two_io.onnx}}, loss mse)
program fortran_multiarg
  use, intrinsic :: iso_fortran_env, only: real32, real64, error_unit
  use tandem
  implicit none
  integer, parameter :: B = 6
  type(tandem_model) :: model
  type(tandem_tensor_list) :: inputs, labels, outputs
  real(real32), target :: a(5, B), bb(2, B), t1(4, B), t2(1, B), y1(4, B), y2(1, B)
  real(real64), target :: a8(5, B)
  real(real32) :: loss, first, err
  character(len=1024) :: config
  integer :: i, j, s

  call get_command_argument(1, config)
  do j = 1, B
    do i = 1, 5
      a(i, j) = sin(real(i * j, real32))
    end do
    bb(:, j) = [0.1 * j, -0.2 * j]
  end do
  a8 = real(a, real64)
  t1 = 0.5
  t2 = -1.0
  call check(tandem_model_create(model, trim(config), "cpu"), "tandem_model_create")
  call check(tandem_tensor_list_create(inputs), "tandem_tensor_list_create")
  call check(tandem_tensor_list_create(labels), "tandem_tensor_list_create")
  call check(tandem_tensor_list_create(outputs), "tandem_tensor_list_create")
  call check(tandem_tensor_list_add_tensor(inputs, a8), "tandem_tensor_list_add_tensor")  ! real64: converted
  call check(tandem_tensor_list_add_tensor(inputs, bb), "tandem_tensor_list_add_tensor")
  call check(tandem_tensor_list_add_tensor(labels, t1), "tandem_tensor_list_add_tensor")
  call check(tandem_tensor_list_add_tensor(labels, t2), "tandem_tensor_list_add_tensor")
  call check(tandem_tensor_list_add_tensor(outputs, y1), "tandem_tensor_list_add_tensor")
  call check(tandem_tensor_list_add_tensor(outputs, y2), "tandem_tensor_list_add_tensor")
  do s = 1, 40
    call check(tandem_train_multiarg(model, inputs, labels, loss), "tandem_train_multiarg")
    if (s == 1) first = loss
  end do
  call check(tandem_inference_multiarg(model, inputs, outputs), "tandem_inference_multiarg")
  err = sum((y1 - t1)**2) / size(y1) + sum((y2 - t2)**2) / size(y2)
  print '(a, f8.5, a, f8.5, a, f8.5)', 'fortran multiarg: loss ', first, ' -> ', loss, ', inference mse ', err
  if (.not. (loss < first / 3) .or. abs(err - loss) > 0.5 * loss) then
    write (error_unit, '(a)') 'fortran multiarg: did not learn the targets'
    stop 1
  end if
  call check(tandem_tensor_list_destroy(inputs), "tandem_tensor_list_destroy")
  call check(tandem_tensor_list_destroy(labels), "tandem_tensor_list_destroy")
  call check(tandem_tensor_list_destroy(outputs), "tandem_tensor_list_destroy")
  call check(tandem_model_destroy(model), "tandem_model_destroy")

contains

  subroutine check(res, what)
    integer, intent(in) :: res
    character(len=*), intent(in) :: what
    if (res /= TANDEM_SUCCESS) then
      write (error_unit, '(a, a, a)') what, ' failed: ', tandem_last_error()
      stop 1
    end if
  end subroutine check

end program fortran_multiarg
