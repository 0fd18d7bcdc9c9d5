#!/usr/bin/env bash
# installed_examples.sh BUILD SOURCE WORK MPIEXEC: installs BUILD into WORK/prefix, checks that every
# installed header compiles on its own (so none needs a header that is not installed), builds
# examples/cpp against the prefix with CMake (find_package) and with pkg-config, examples/c (a C
# project: no C++ in sight) and examples/fortran (Fortran only) with CMake, and runs them on 1 and 2
# ranks: the C++ example's held-out loss and the surrogates' errors must fall.
set -euo pipefail
build=$1 src=$2 work=$3 mpiexec=$4
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null

# Nothing internal shipped, the public face there.
for must in include/tandem/tandem.h include/tandem/version.h include/tandem/runtime/tensor.h \
            lib/cmake/tandem/tandemConfig.cmake lib/cmake/tandem/tandemConfigVersion.cmake lib/pkgconfig/tandem.pc; do
  [[ -e $prefix/$must ]] || { echo "not installed: $must" >&2; exit 1; }
done
for mustnot in include/tandem/runtime/backend/registry.h include/tandem/kernels include/tandem/comm/ring.h \
               include/tandem/runtime/ops/op_checks.h include/tandem/nn/optim/per_device.h \
               include/tandem/runtime/serialization/json_integer.h; do
  [[ ! -e $prefix/$mustnot ]] || { echo "internal header installed: $mustnot" >&2; exit 1; }
done

# Each header on its own, with the flags pkg-config gives (MPI's among them).
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
cflags=$(pkg-config --cflags tandem)
[[ -n ${CUDA_INCLUDE:-} ]] && cflags+=" -I$CUDA_INCLUDE"
(cd "$prefix/include" && find tandem -name '*.h' | sort) | while read -r h; do
  echo "#include <$h>" > "$work/one_header.cpp"
  c++ -std=c++17 -fsyntax-only $cflags "$work/one_header.cpp" 2>"$work/one_header.err" ||
    { echo "installed header $h does not compile on its own:" >&2; cat "$work/one_header.err" >&2; exit 1; }
done

# The C API header as C.
if [[ -e $prefix/include/tandem/tandem_c.h ]]; then
  echo "#include <tandem/tandem_c.h>" > "$work/c_header.c"
  cc -std=c99 -Wall -Werror -fsyntax-only $cflags "$work/c_header.c"
fi

# With CMake, as the example's README says.
cmake -S "$src/examples/cpp" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/cmake-build" >/dev/null
# With pkg-config.
c++ -std=c++17 -O2 $cflags "$src/examples/cpp/train_ddp.cpp" -o "$work/train_ddp_pc" \
  $(pkg-config --libs tandem) -Wl,-rpath,"$prefix/lib"
for n in 1 2; do
  "$mpiexec" -np "$n" --oversubscribe --bind-to none "$work/cmake-build/train_ddp" 200
done
"$mpiexec" -np 1 --oversubscribe "$work/train_ddp_pc" 50 >/dev/null

if [[ -e $prefix/include/tandem/tandem_c.h ]]; then
  cmake -S "$src/examples/c" -B "$work/c-build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$work/c-build" >/dev/null
  for n in 1 2; do
    "$mpiexec" -np "$n" --oversubscribe --bind-to none "$work/c-build/heat_surrogate" \
      "$src/examples/c/heat_surrogate.yaml" 400
  done
fi
if [[ -e $prefix/include/tandem/fortran/tandem.mod ]]; then
  cmake -S "$src/examples/fortran" -B "$work/f-build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
    >/dev/null
  cmake --build "$work/f-build" >/dev/null
  for n in 1 2; do
    "$mpiexec" -np "$n" --oversubscribe --bind-to none "$work/f-build/heat_surrogate_f" \
      "$src/examples/fortran/heat_surrogate.yaml" 400
  done
fi
echo "installed package: headers, find_package and pkg-config builds, examples on 1 and 2 ranks: ok"
