# tandem_add_test(NAME SOURCES a.cpp b.cpp [LIBS ...] [RANKS 1 2 3 4] [TIMEOUT s] [LABELS ...] [AVX2])
# One GoogleTest executable; without RANKS it runs as one process, with RANKS once per rank count
# under the MPI launcher, ${TANDEM_MPIEXEC} (cmake/mpi_launcher.cmake: Open MPI's or MPICH's with its
# flags; each run is its own ctest test, NAME_npN). Every test carries a timeout: none hangs CI.
# AVX2 (CPU kernel tests, without RANKS): also run as NAME_avx2 under TANDEM_CPU_ISA=avx2, the paths of
# a CPU without AVX-512, whatever CPU runs the suite (label isa-avx2).
find_package(GTest REQUIRED)

function(tandem_add_test name)
  cmake_parse_arguments(T "AVX2" "TIMEOUT" "SOURCES;LIBS;RANKS;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE tandem GTest::gtest ${T_LIBS})
  if(NOT T_RANKS)
    target_link_libraries(${name} PRIVATE GTest::gtest_main)
    add_test(NAME ${name} COMMAND ${name})
    set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}")
    if(T_AVX2)
      add_test(NAME ${name}_avx2 COMMAND ${name})
      set_tests_properties(${name}_avx2 PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "isa-avx2;${T_LABELS}"
                           ENVIRONMENT TANDEM_CPU_ISA=avx2)
    endif()
    return()
  endif()
  foreach(np ${T_RANKS})
    add_test(NAME ${name}_np${np}
             COMMAND ${TANDEM_MPIEXEC} ${MPIEXEC_NUMPROC_FLAG} ${np} $<TARGET_FILE:${name}>)
    set_tests_properties(${name}_np${np} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "mpi;${T_LABELS}"
      ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1")
  endforeach()
endfunction()
