! A GPT through the Fortran module: token ids(T, B) and next-token labels(T, B) as int64, logits
! (V, T, B) from inference. It learns a cycle of 12 tokens: the loss falls to a tenth and every
! position's most likely token is the next one. Exits 1 with a message otherwise.
!   fortran_gpt CONFIG_FILE
program fortran_gpt
  use, intrinsic :: iso_fortran_env, only: int64, real32, error_unit
  use tandem
  implicit none
  integer, parameter :: T = 16, B = 4, V = 12
  type(tandem_model) :: model
  integer(int64) :: ids(T, B), next(T, B)
  real(real32) :: logits(V, T, B), loss, first
  character(len=1024) :: config
  integer :: i, j, s, right

  call get_command_argument(1, config)
  do j = 1, B
    do i = 1, T
      ids(i, j) = mod(3 * (j - 1) + (i - 1), V)
      next(i, j) = mod(ids(i, j) + 1, V)
    end do
  end do
  call check(tandem_model_create(model, trim(config), "cpu"), "tandem_model_create")
  do s = 1, 60
    call check(tandem_train(model, ids, next, loss), "tandem_train")
    if (s == 1) first = loss
  end do
  call check(tandem_inference(model, ids, logits), "tandem_inference")
  right = 0
  do j = 1, B
    do i = 1, T
      if (maxloc(logits(:, i, j), 1) - 1 == next(i, j)) right = right + 1
    end do
  end do
  print '(a, f7.4, a, f7.4, a, i0, a, i0)', 'fortran gpt: loss ', first, ' -> ', loss, ', right ', right, ' of ', T * B
  if (.not. (loss < 0.1 * first) .or. right /= T * B) then
    write (error_unit, '(a)') 'fortran gpt: did not learn the cycle'
    stop 1
  end if
  call check(tandem_model_destroy(model), "tandem_model_destroy")

contains

  subroutine check(code, what)
    integer, intent(in) :: code
    character(len=*), intent(in) :: what
    if (code /= TANDEM_SUCCESS) then
      write (error_unit, '(a, a, a)') what, ': ', tandem_last_error()
      stop 1
    end if
  end subroutine check

end program fortran_gpt
