# What `cmake --install build --prefix P` ships, and the package a consumer finds with
# find_package(tandem 0.1 REQUIRED) + target_link_libraries(app tandem::tandem):
#   P/lib/libtandem.so*                      the library
#   P/include/tandem/tandem.h, version.h     the C++ umbrella header
#   P/include/tandem/{runtime,nn,comm}/...   the public headers it includes (cmake/public_headers.txt; same
#                                            paths as in the tree, including each other as "tandem/...")
#   P/lib/cmake/tandem/                      tandemConfig.cmake, its version file, the exported targets
#   P/lib/pkgconfig/tandem.pc                for builds without CMake (its Libs carry an rpath to P/lib)
#   P/bin/tandem-train, tandem-serve, tandem-plot   the programs (each app's CMakeLists installs its
#                                            own); they find libtandem through RPATH $ORIGIN/../lib.
#                                            tandem-serve's openapi.json and dashboard are compiled
#                                            in; tandem-plot runs gnuplot from PATH
# Not installed: the backend interface and the backends (runtime/backend, kernels/), the
# communicator's machinery (comm/ but the interface and the MPI factory), the apps' library, tests.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS tandem EXPORT tandemTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The installed programs find the library relative to themselves, wherever the prefix is.
file(RELATIVE_PATH _tandem_bin_to_lib ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})
set_target_properties(tandem-train tandem-serve tandem-plot PROPERTIES INSTALL_RPATH "$ORIGIN/${_tandem_bin_to_lib}")

set(_tandem_headers ${CMAKE_INSTALL_INCLUDEDIR}/tandem)
# The public headers: an explicit list (cmake/public_headers.txt, the closure of <tandem/tandem.h>,
# kept so by scripts/check-public-headers), each under include/tandem/ at its path in the tree.
file(STRINGS cmake/public_headers.txt _tandem_public REGEX "^[^#]")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS cmake/public_headers.txt)
foreach(_h ${_tandem_public})
  get_filename_component(_dir ${_h} DIRECTORY)
  install(FILES ${_h} DESTINATION ${_tandem_headers}/${_dir})
endforeach()
if(TANDEM_CUDA)
  install(FILES comm/nccl/nccl_comm.h DESTINATION ${_tandem_headers}/comm/nccl)
endif()
install(FILES include/tandem/tandem.h ${PROJECT_BINARY_DIR}/include/tandem/version.h DESTINATION ${_tandem_headers})
# Installed, the headers include each other as "tandem/runtime/tensor.h": a consumer's include path
# is P/include alone, and no top-level runtime/, nn/ or comm/ of ours shadows its own.
install(CODE "set(TANDEM_INSTALLED_HEADERS \"${_tandem_headers}\")")
install(SCRIPT cmake/prefix_includes.cmake)

set(_tandem_cmake ${CMAKE_INSTALL_LIBDIR}/cmake/tandem)
install(EXPORT tandemTargets NAMESPACE tandem:: DESTINATION ${_tandem_cmake})
configure_package_config_file(cmake/tandemConfig.cmake.in ${PROJECT_BINARY_DIR}/tandemConfig.cmake
                              INSTALL_DESTINATION ${_tandem_cmake})
# 0.x: a minor release may change the API, so only the same minor version is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tandemConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tandemConfig.cmake ${PROJECT_BINARY_DIR}/tandemConfigVersion.cmake
        DESTINATION ${_tandem_cmake})

# pkg-config: the flags of the library and its public dependencies (MPI through its own .pc:
# mpi-cxx, the name Debian's MPI alternatives give whichever MPI is installed, Open MPI or MPICH).
set(_tandem_pc_requires "fmt nlohmann_json")
if(TANDEM_MPI)
  string(APPEND _tandem_pc_requires " mpi-cxx")
endif()
set(_tandem_pc_libs "-ltandem")
if(TANDEM_MPI)
  set(_tandem_pc_libs "-ltandem_c -ltandem")  # the C API library too (it is built with MPI)
endif()
set(_tandem_pc_defines "")
if(TANDEM_MPI)
  string(APPEND _tandem_pc_defines " -DTANDEM_HAVE_MPI=1")
endif()
if(TANDEM_CUDA)
  string(APPEND _tandem_pc_defines " -DTANDEM_HAVE_CUDA=1")
endif()
# The prefix relative to the .pc file, so that `cmake --install --prefix P` anywhere stays right.
string(REGEX REPLACE "[^/]+" ".." _tandem_pc_up "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
configure_file(cmake/tandem.pc.in ${PROJECT_BINARY_DIR}/tandem.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tandem.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
