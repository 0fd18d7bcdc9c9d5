! tandem's Fortran module (`use tandem`): the C API of include/tandem/tandem_c.h through
! ISO_C_BINDING, generic over real32/real64 arrays of any rank from 1 to 8 (assumed-rank, contiguous),
! and int32/int64 ones for class indices (labels of cross_entropy) and a gpt's token ids: a gpt of
! context T trained on B sequences takes ids(T, B) and next-token labels(T, B), and its inference
! gives logits(vocab_size, T, B).
!
! Layout: Fortran arrays are column-major, the C API's are row-major, so the batch is the LAST
! dimension here: an mlp of 3 inputs trained on 256 samples takes input(3, 256) and label(1, 256);
! tandem sees [256, 3] and [256, 1]. Communicators: type(MPI_Comm) from mpi_f08, or an integer one
! (the mpi module's). Every function returns a result code (TANDEM_SUCCESS = 0); tandem_last_error()
! has the message.
module tandem
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: real32, real64, int32, int64
  use mpi_f08, only: MPI_Comm
  implicit none
  private

  integer(c_int), parameter, public :: TANDEM_SUCCESS = 0, TANDEM_INVALID_USAGE = 1, TANDEM_NOT_SUPPORTED = 2, &
                                       TANDEM_INTERNAL_ERROR = 3, TANDEM_CUDA_ERROR = 4, TANDEM_MPI_ERROR = 5, &
                                       TANDEM_NCCL_ERROR = 6, TANDEM_IO_ERROR = 7, TANDEM_COMM_ERROR = 8
  ! tandem_dtype_t (named apart from iso_fortran_env's kinds, which Fortran would not tell from them)
  integer(c_int), parameter :: DTYPE_F32 = 0, DTYPE_F64 = 1, DTYPE_I32 = 2, DTYPE_I64 = 3

  ! A model: create it with tandem_model_create(_distributed), free it with tandem_model_destroy.
  type, public :: tandem_model
    type(c_ptr) :: handle = c_null_ptr
  end type tandem_model

  ! A list of arrays for the multi-argument calls (a model of several inputs or outputs): it holds
  ! the arrays' addresses, so they must be targets that outlive the calls using the list.
  type, public :: tandem_tensor_list
    type(c_ptr) :: handle = c_null_ptr
  end type tandem_tensor_list

  public :: tandem_version, tandem_last_error, tandem_set_seed, tandem_model_create, &
            tandem_model_create_distributed, tandem_model_destroy, tandem_train, tandem_inference, &
            tandem_save_checkpoint, tandem_load_checkpoint, tandem_get_step, tandem_save_onnx, &
            tandem_tensor_list_create, tandem_tensor_list_destroy, tandem_tensor_list_add_tensor, &
            tandem_train_multiarg, tandem_inference_multiarg

  ! The C entry points.
  interface
    function c_version() bind(c, name="tandem_version") result(s)
      import :: c_ptr
      type(c_ptr) :: s
    end function c_version
    function c_last_error() bind(c, name="tandem_last_error") result(s)
      import :: c_ptr
      type(c_ptr) :: s
    end function c_last_error
    function c_set_seed(seed) bind(c, name="tandem_set_seed") result(res)
      import :: c_int, c_int64_t
      integer(c_int64_t), value :: seed
      integer(c_int) :: res
    end function c_set_seed
    function c_create(model, config, device) bind(c, name="tandem_model_create") result(res)
      import :: c_ptr, c_char, c_int
      type(c_ptr) :: model
      character(kind=c_char), dimension(*) :: config, device
      integer(c_int) :: res
    end function c_create
    function c_create_distributed_f(model, config, comm, device) bind(c, name="tandem_model_create_distributed_f") &
        result(res)
      import :: c_ptr, c_char, c_int
      type(c_ptr) :: model
      character(kind=c_char), dimension(*) :: config, device
      integer(c_int), value :: comm
      integer(c_int) :: res
    end function c_create_distributed_f
    function c_destroy(model) bind(c, name="tandem_model_destroy") result(res)
      import :: c_ptr, c_int
      type(c_ptr), value :: model
      integer(c_int) :: res
    end function c_destroy
    function c_train(model, input, input_dtype, input_rank, input_shape, label, label_dtype, label_rank, &
                     label_shape, loss) bind(c, name="tandem_train") result(res)
      import :: c_ptr, c_int, c_int64_t
      type(c_ptr), value :: model, input, label, loss
      integer(c_int), value :: input_dtype, input_rank, label_dtype, label_rank
      integer(c_int64_t), dimension(*) :: input_shape, label_shape
      integer(c_int) :: res
    end function c_train
    function c_inference(model, input, input_dtype, input_rank, input_shape, output, output_dtype, output_rank, &
                         output_shape) bind(c, name="tandem_inference") result(res)
      import :: c_ptr, c_int, c_int64_t
      type(c_ptr), value :: model, input, output
      integer(c_int), value :: input_dtype, input_rank, output_dtype, output_rank
      integer(c_int64_t), dimension(*) :: input_shape, output_shape
      integer(c_int) :: res
    end function c_inference
    function c_save_checkpoint(model, dir) bind(c, name="tandem_save_checkpoint") result(res)
      import :: c_ptr, c_char, c_int
      type(c_ptr), value :: model
      character(kind=c_char), dimension(*) :: dir
      integer(c_int) :: res
    end function c_save_checkpoint
    function c_save_onnx(model, path) bind(c, name="tandem_save_onnx") result(res)
      import :: c_ptr, c_char, c_int
      type(c_ptr), value :: model
      character(kind=c_char), dimension(*) :: path
      integer(c_int) :: res
    end function c_save_onnx
    function c_load_checkpoint(model, path) bind(c, name="tandem_load_checkpoint") result(res)
      import :: c_ptr, c_char, c_int
      type(c_ptr), value :: model
      character(kind=c_char), dimension(*) :: path
      integer(c_int) :: res
    end function c_load_checkpoint
    function c_get_step(model, step) bind(c, name="tandem_get_step") result(res)
      import :: c_ptr, c_int, c_int64_t
      type(c_ptr), value :: model
      integer(c_int64_t) :: step
      integer(c_int) :: res
    end function c_get_step
    function c_list_create(list) bind(c, name="tandem_tensor_list_create") result(res)
      import :: c_ptr, c_int
      type(c_ptr) :: list
      integer(c_int) :: res
    end function c_list_create
    function c_list_destroy(list) bind(c, name="tandem_tensor_list_destroy") result(res)
      import :: c_ptr, c_int
      type(c_ptr), value :: list
      integer(c_int) :: res
    end function c_list_destroy
    function c_list_add(list, data, dtype, rank, shape) bind(c, name="tandem_tensor_list_add_tensor") result(res)
      import :: c_ptr, c_int, c_int64_t
      type(c_ptr), value :: list, data
      integer(c_int), value :: dtype, rank
      integer(c_int64_t), dimension(*) :: shape
      integer(c_int) :: res
    end function c_list_add
    function c_train_multiarg(model, inputs, labels, loss) bind(c, name="tandem_train_multiarg") result(res)
      import :: c_ptr, c_int
      type(c_ptr), value :: model, inputs, labels, loss
      integer(c_int) :: res
    end function c_train_multiarg
    function c_inference_multiarg(model, inputs, outputs) bind(c, name="tandem_inference_multiarg") result(res)
      import :: c_ptr, c_int
      type(c_ptr), value :: model, inputs, outputs
      integer(c_int) :: res
    end function c_inference_multiarg
    function c_strlen(s) bind(c, name="strlen") result(n)
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: n
    end function c_strlen
  end interface

  interface tandem_model_create_distributed
    module procedure create_distributed_f08, create_distributed_int
  end interface tandem_model_create_distributed

  interface tandem_train
    module procedure train_r4_r4, train_r4_r8, train_r8_r4, train_r8_r8
    ! class indices as labels; token ids in and out (gpt)
    module procedure train_r4_i4, train_r4_i8, train_r8_i4, train_r8_i8, train_i4_i4, train_i8_i8
  end interface tandem_train

  interface tandem_tensor_list_add_tensor
    module procedure list_add_r4, list_add_r8, list_add_i4, list_add_i8
  end interface tandem_tensor_list_add_tensor

  interface tandem_inference
    module procedure inference_r4_r4, inference_r4_r8, inference_r8_r4, inference_r8_r8
    module procedure inference_i4_r4, inference_i4_r8, inference_i8_r4, inference_i8_r8  ! token ids (gpt)
  end interface tandem_inference

contains

  ! A NUL-terminated copy of a Fortran string (trailing blanks dropped).
  function c_str(s) result(c)
    character(len=*), intent(in) :: s
    character(kind=c_char, len=len_trim(s) + 1) :: c
    c = trim(s) // c_null_char
  end function c_str

  function f_str(p) result(s)
    type(c_ptr), intent(in) :: p
    character(len=:), allocatable :: s
    character(kind=c_char), pointer :: chars(:)
    integer :: i, n
    n = int(c_strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate(character(len=n) :: s)
    do i = 1, n
      s(i:i) = chars(i)
    end do
  end function f_str

  function tandem_version() result(s)
    character(len=:), allocatable :: s
    s = f_str(c_version())
  end function tandem_version

  function tandem_last_error() result(s)
    character(len=:), allocatable :: s
    s = f_str(c_last_error())
  end function tandem_last_error

  function tandem_set_seed(seed) result(res)
    integer(int64), intent(in) :: seed
    integer(c_int) :: res
    res = c_set_seed(int(seed, c_int64_t))
  end function tandem_set_seed

  function tandem_model_create(model, config_file, device) result(res)
    type(tandem_model), intent(out) :: model
    character(len=*), intent(in) :: config_file, device
    integer(c_int) :: res
    res = c_create(model%handle, c_str(config_file), c_str(device))
  end function tandem_model_create

  function create_distributed_f08(model, config_file, comm, device) result(res)
    type(tandem_model), intent(out) :: model
    character(len=*), intent(in) :: config_file, device
    type(MPI_Comm), intent(in) :: comm
    integer(c_int) :: res
    res = c_create_distributed_f(model%handle, c_str(config_file), int(comm%MPI_VAL, c_int), c_str(device))
  end function create_distributed_f08

  function create_distributed_int(model, config_file, comm, device) result(res)
    type(tandem_model), intent(out) :: model
    character(len=*), intent(in) :: config_file, device
    integer, intent(in) :: comm
    integer(c_int) :: res
    res = c_create_distributed_f(model%handle, c_str(config_file), int(comm, c_int), c_str(device))
  end function create_distributed_int

  function tandem_model_destroy(model) result(res)
    type(tandem_model), intent(inout) :: model
    integer(c_int) :: res
    res = c_destroy(model%handle)
    model%handle = c_null_ptr
  end function tandem_model_destroy

  ! Fortran's shape, last dimension first: the C API's row-major shape of the same memory.
  function c_shape(fshape) result(s)
    integer(c_int64_t), intent(in) :: fshape(:)
    integer(c_int64_t) :: s(max(size(fshape), 1))
    s = 1
    if (size(fshape) > 0) s = fshape(size(fshape):1:-1)
  end function c_shape

  function train_any(model, input, input_dtype, input_shape, label, label_dtype, label_shape, loss) result(res)
    type(tandem_model), intent(in) :: model
    type(c_ptr), intent(in) :: input, label
    integer(c_int), intent(in) :: input_dtype, label_dtype
    integer(c_int64_t), intent(in) :: input_shape(:), label_shape(:)
    real(c_float), intent(out), optional, target :: loss
    integer(c_int) :: res
    type(c_ptr) :: loss_ptr
    loss_ptr = c_null_ptr
    if (present(loss)) loss_ptr = c_loc(loss)
    res = c_train(model%handle, input, input_dtype, int(size(input_shape), c_int), c_shape(input_shape), label, &
                  label_dtype, int(size(label_shape), c_int), c_shape(label_shape), loss_ptr)
  end function train_any

  function train_r4_r4(model, input, label, loss) result(res)
    type(tandem_model), intent(in) :: model
    real(real32), intent(in), contiguous, target :: input(..), label(..)
    real(c_float), intent(out), optional :: loss
    integer(c_int) :: res
    res = train_any(model, c_loc(input), DTYPE_F32, shape(input, c_int64_t), c_loc(label), DTYPE_F32, &
                    shape(label, c_int64_t), loss)
  end function train_r4_r4

  function train_r4_r8(model, input, label, loss) result(res)
    type(tandem_model), intent(in) :: model
    real(real32), intent(in), contiguous, target :: input(..)
    real(real64), intent(in), contiguous, target :: label(..)
    real(c_float), intent(out), optional :: loss
    integer(c_int) :: res
    res = train_any(model, c_loc(input), DTYPE_F32, shape(input, c_int64_t), c_loc(label), DTYPE_F64, &
                    shape(label, c_int64_t), loss)
  end function train_r4_r8

  function train_r8_r4(model, input, label, loss) result(res)
    type(tandem_model), intent(in) :: model
    real(real64), intent(in), contiguous, target :: input(..)
    real(real32), intent(in), contiguous, target :: label(..)
    real(c_float), intent(out), optional :: loss
    integer(c_int) :: res
    res = train_any(model, c_loc(input), DTYPE_F64, shape(input, c_int64_t), c_loc(label), DTYPE_F32, &
                    shape(label, c_int64_t), loss)
  end function train_r8_r4

  function train_r8_r8(model, input, label, loss) result(res)
    type(tandem_model), intent(in) :: model
    real(real64), intent(in), contiguous, target :: input(..), label(..)
    real(c_float), intent(out), optional :: loss
    integer(c_int) :: res
    res = train_any(model, c_loc(input), DTYPE_F64, shape(input, c_int64_t), c_loc(label), DTYPE_F64, &
                    shape(label, c_int64_t), loss)
  end function train_r8_r8

  function train_r4_i4(model, input, label, loss) result(res)
    type(tandem_model), intent(in) :: model
    real(real32), intent(in), contiguous, target :: input(..)
    integer(int32), intent(in), contiguous, target :: label(..)
    real(c_float), intent(out), optional :: loss
    integer(c_int) :: res
    res = train_any(model, c_loc(input), DTYPE_F32, shape(input, c_int64_t), c_loc(label), DTYPE_I32, &
                    shape(label, c_int64_t), loss)
  end function train_r4_i4

  function train_r4_i8(model, input, label, loss) result(res)
    type(tandem_model), intent(in) :: model
    real(real32), intent(in), contiguous, target :: input(..)
    integer(int64), intent(in), contiguous, target :: label(..)
    real(c_float), intent(out), optional :: loss
    integer(c_int) :: res
    res = train_any(model, c_loc(input), DTYPE_F32, shape(input, c_int64_t), c_loc(label), DTYPE_I64, &
                    shape(label, c_int64_t), loss)
  end function train_r4_i8

  function train_r8_i4(model, input, label, loss) result(res)
    type(tandem_model), intent(in) :: model
    real(real64), intent(in), contiguous, target :: input(..)
    integer(int32), intent(in), contiguous, target :: label(..)
    real(c_float), intent(out), optional :: loss
    integer(c_int) :: res
    res = train_any(model, c_loc(input), DTYPE_F64, shape(input, c_int64_t), c_loc(label), DTYPE_I32, &
                    shape(label, c_int64_t), loss)
  end function train_r8_i4

  function train_r8_i8(model, input, label, loss) result(res)
    type(tandem_model), intent(in) :: model
    real(real64), intent(in), contiguous, target :: input(..)
    integer(int64), intent(in), contiguous, target :: label(..)
    real(c_float), intent(out), optional :: loss
    integer(c_int) :: res
    res = train_any(model, c_loc(input), DTYPE_F64, shape(input, c_int64_t), c_loc(label), DTYPE_I64, &
                    shape(label, c_int64_t), loss)
  end function train_r8_i8

  function train_i4_i4(model, input, label, loss) result(res)
    type(tandem_model), intent(in) :: model
    integer(int32), intent(in), contiguous, target :: input(..)
    integer(int32), intent(in), contiguous, target :: label(..)
    real(c_float), intent(out), optional :: loss
    integer(c_int) :: res
    res = train_any(model, c_loc(input), DTYPE_I32, shape(input, c_int64_t), c_loc(label), DTYPE_I32, &
                    shape(label, c_int64_t), loss)
  end function train_i4_i4

  function train_i8_i8(model, input, label, loss) result(res)
    type(tandem_model), intent(in) :: model
    integer(int64), intent(in), contiguous, target :: input(..)
    integer(int64), intent(in), contiguous, target :: label(..)
    real(c_float), intent(out), optional :: loss
    integer(c_int) :: res
    res = train_any(model, c_loc(input), DTYPE_I64, shape(input, c_int64_t), c_loc(label), DTYPE_I64, &
                    shape(label, c_int64_t), loss)
  end function train_i8_i8

  function inference_any(model, input, input_dtype, input_shape, output, output_dtype, output_shape) result(res)
    type(tandem_model), intent(in) :: model
    type(c_ptr), intent(in) :: input, output
    integer(c_int), intent(in) :: input_dtype, output_dtype
    integer(c_int64_t), intent(in) :: input_shape(:), output_shape(:)
    integer(c_int) :: res
    res = c_inference(model%handle, input, input_dtype, int(size(input_shape), c_int), c_shape(input_shape), &
                      output, output_dtype, int(size(output_shape), c_int), c_shape(output_shape))
  end function inference_any

  function inference_r4_r4(model, input, output) result(res)
    type(tandem_model), intent(in) :: model
    real(real32), intent(in), contiguous, target :: input(..)
    real(real32), intent(inout), contiguous, target :: output(..)
    integer(c_int) :: res
    res = inference_any(model, c_loc(input), DTYPE_F32, shape(input, c_int64_t), c_loc(output), DTYPE_F32, &
                        shape(output, c_int64_t))
  end function inference_r4_r4

  function inference_r4_r8(model, input, output) result(res)
    type(tandem_model), intent(in) :: model
    real(real32), intent(in), contiguous, target :: input(..)
    real(real64), intent(inout), contiguous, target :: output(..)
    integer(c_int) :: res
    res = inference_any(model, c_loc(input), DTYPE_F32, shape(input, c_int64_t), c_loc(output), DTYPE_F64, &
                        shape(output, c_int64_t))
  end function inference_r4_r8

  function inference_r8_r4(model, input, output) result(res)
    type(tandem_model), intent(in) :: model
    real(real64), intent(in), contiguous, target :: input(..)
    real(real32), intent(inout), contiguous, target :: output(..)
    integer(c_int) :: res
    res = inference_any(model, c_loc(input), DTYPE_F64, shape(input, c_int64_t), c_loc(output), DTYPE_F32, &
                        shape(output, c_int64_t))
  end function inference_r8_r4

  function inference_r8_r8(model, input, output) result(res)
    type(tandem_model), intent(in) :: model
    real(real64), intent(in), contiguous, target :: input(..)
    real(real64), intent(inout), contiguous, target :: output(..)
    integer(c_int) :: res
    res = inference_any(model, c_loc(input), DTYPE_F64, shape(input, c_int64_t), c_loc(output), DTYPE_F64, &
                        shape(output, c_int64_t))
  end function inference_r8_r8

  function inference_i4_r4(model, input, output) result(res)
    type(tandem_model), intent(in) :: model
    integer(int32), intent(in), contiguous, target :: input(..)
    real(real32), intent(inout), contiguous, target :: output(..)
    integer(c_int) :: res
    res = inference_any(model, c_loc(input), DTYPE_I32, shape(input, c_int64_t), c_loc(output), DTYPE_F32, &
                        shape(output, c_int64_t))
  end function inference_i4_r4

  function inference_i4_r8(model, input, output) result(res)
    type(tandem_model), intent(in) :: model
    integer(int32), intent(in), contiguous, target :: input(..)
    real(real64), intent(inout), contiguous, target :: output(..)
    integer(c_int) :: res
    res = inference_any(model, c_loc(input), DTYPE_I32, shape(input, c_int64_t), c_loc(output), DTYPE_F64, &
                        shape(output, c_int64_t))
  end function inference_i4_r8

  function inference_i8_r4(model, input, output) result(res)
    type(tandem_model), intent(in) :: model
    integer(int64), intent(in), contiguous, target :: input(..)
    real(real32), intent(inout), contiguous, target :: output(..)
    integer(c_int) :: res
    res = inference_any(model, c_loc(input), DTYPE_I64, shape(input, c_int64_t), c_loc(output), DTYPE_F32, &
                        shape(output, c_int64_t))
  end function inference_i8_r4

  function inference_i8_r8(model, input, output) result(res)
    type(tandem_model), intent(in) :: model
    integer(int64), intent(in), contiguous, target :: input(..)
    real(real64), intent(inout), contiguous, target :: output(..)
    integer(c_int) :: res
    res = inference_any(model, c_loc(input), DTYPE_I64, shape(input, c_int64_t), c_loc(output), DTYPE_F64, &
                        shape(output, c_int64_t))
  end function inference_i8_r8

  function tandem_save_checkpoint(model, dir) result(res)
    type(tandem_model), intent(in) :: model
    character(len=*), intent(in) :: dir
    integer(c_int) :: res
    res = c_save_checkpoint(model%handle, c_str(dir))
  end function tandem_save_checkpoint

  ! The model as an ONNX file: an imported one with its trained weights, mlp/cnn/sequential/gpt
  ! exported (tandem_c.h).
  function tandem_save_onnx(model, path) result(res)
    type(tandem_model), intent(in) :: model
    character(len=*), intent(in) :: path
    integer(c_int) :: res
    res = c_save_onnx(model%handle, c_str(path))
  end function tandem_save_onnx

  function tandem_load_checkpoint(model, path) result(res)
    type(tandem_model), intent(in) :: model
    character(len=*), intent(in) :: path
    integer(c_int) :: res
    res = c_load_checkpoint(model%handle, c_str(path))
  end function tandem_load_checkpoint

  function tandem_get_step(model, step) result(res)
    type(tandem_model), intent(in) :: model
    integer(int64), intent(out) :: step
    integer(c_int) :: res
    integer(c_int64_t) :: s
    res = c_get_step(model%handle, s)
    step = int(s, int64)
  end function tandem_get_step

  function tandem_tensor_list_create(list) result(res)
    type(tandem_tensor_list), intent(out) :: list
    integer(c_int) :: res
    res = c_list_create(list%handle)
  end function tandem_tensor_list_create

  function tandem_tensor_list_destroy(list) result(res)
    type(tandem_tensor_list), intent(inout) :: list
    integer(c_int) :: res
    res = c_list_destroy(list%handle)
    list%handle = c_null_ptr
  end function tandem_tensor_list_destroy

  ! Adds an array (the batch its last dimension, as for tandem_train).
  function list_add_r4(list, array) result(res)
    type(tandem_tensor_list), intent(in) :: list
    real(real32), intent(in), contiguous, target :: array(..)
    integer(c_int) :: res
    res = c_list_add(list%handle, c_loc(array), DTYPE_F32, int(rank(array), c_int), c_shape(shape(array, c_int64_t)))
  end function list_add_r4

  function list_add_r8(list, array) result(res)
    type(tandem_tensor_list), intent(in) :: list
    real(real64), intent(in), contiguous, target :: array(..)
    integer(c_int) :: res
    res = c_list_add(list%handle, c_loc(array), DTYPE_F64, int(rank(array), c_int), c_shape(shape(array, c_int64_t)))
  end function list_add_r8

  function list_add_i4(list, array) result(res)
    type(tandem_tensor_list), intent(in) :: list
    integer(int32), intent(in), contiguous, target :: array(..)
    integer(c_int) :: res
    res = c_list_add(list%handle, c_loc(array), DTYPE_I32, int(rank(array), c_int), c_shape(shape(array, c_int64_t)))
  end function list_add_i4

  function list_add_i8(list, array) result(res)
    type(tandem_tensor_list), intent(in) :: list
    integer(int64), intent(in), contiguous, target :: array(..)
    integer(c_int) :: res
    res = c_list_add(list%handle, c_loc(array), DTYPE_I64, int(rank(array), c_int), c_shape(shape(array, c_int64_t)))
  end function list_add_i8

  ! Several inputs and one label per model output (tandem_c.h: the loss is summed over the outputs).
  function tandem_train_multiarg(model, inputs, labels, loss) result(res)
    type(tandem_model), intent(in) :: model
    type(tandem_tensor_list), intent(in) :: inputs, labels
    real(c_float), intent(out), optional, target :: loss
    integer(c_int) :: res
    type(c_ptr) :: loss_ptr
    loss_ptr = c_null_ptr
    if (present(loss)) loss_ptr = c_loc(loss)
    res = c_train_multiarg(model%handle, inputs%handle, labels%handle, loss_ptr)
  end function tandem_train_multiarg

  ! The outputs list's arrays (real32 or real64) receive the model's outputs, in order.
  function tandem_inference_multiarg(model, inputs, outputs) result(res)
    type(tandem_model), intent(in) :: model
    type(tandem_tensor_list), intent(in) :: inputs, outputs
    integer(c_int) :: res
    res = c_inference_multiarg(model%handle, inputs%handle, outputs%handle)
  end function tandem_inference_multiarg

end module tandem
