#!/usr/bin/env bash
# installed_examples.sh BUILD SOURCE WORK MPIEXEC: installs BUILD into WORK/prefix, checks that every
# installed header compiles on its own (so none needs a header that is not installed), builds
# examples/cpp against the prefix with CMake (find_package) and with pkg-config, examples/c (a C
# project: no C++ in sight) and examples/fortran (Fortran only) with CMake, and runs them on 1 and 2
# ranks: the C++ example's held-out loss and the surrogates' errors must fall. Runs the installed
# programs from P/bin.
set -euo pipefail
build=$1 src=$2 work=$3 mpiexec=$4
# No folder on LD_LIBRARY_PATH may supply libtandem (CUDA's may stay): the installed programs and the
# pkg-config build must find the library through their RPATH.
ld_path=
IFS=: read -ra ld_dirs <<< "${LD_LIBRARY_PATH:-}"
for d in "${ld_dirs[@]}"; do
  if [[ -n $d ]] && ! compgen -G "$d/libtandem*" >/dev/null; then ld_path+=${ld_path:+:}$d; fi
done
if [[ -n $ld_path ]]; then export LD_LIBRARY_PATH=$ld_path; else unset LD_LIBRARY_PATH; fi
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null

# Nothing internal shipped, the public face there.
for must in include/tandem/tandem.h include/tandem/version.h include/tandem/runtime/tensor.h \
            lib/cmake/tandem/tandemConfig.cmake lib/cmake/tandem/tandemConfigVersion.cmake lib/pkgconfig/tandem.pc \
            bin/tandem-train bin/tandem-serve bin/tandem-plot; do
  [[ -e $prefix/$must ]] || { echo "not installed: $must" >&2; exit 1; }
done
for mustnot in include/tandem/runtime/backend/registry.h include/tandem/kernels include/tandem/comm/ring.h \
               include/tandem/runtime/ops/op_checks.h include/tandem/nn/optim/per_device.h \
               include/tandem/runtime/serialization/json_integer.h include/tandem/runtime/autograd_nodes.h \
               include/tandem/runtime/fault.h include/tandem/nn/parallel/device_workers.h \
               include/tandem/nn/config/checks.h include/tandem/apps; do
  [[ ! -e $prefix/$mustnot ]] || { echo "internal header installed: $mustnot" >&2; exit 1; }
done
# Installed headers name each other "tandem/...": nothing includes a bare "runtime/", "nn/", "comm/" or "train/".
if grep -rlE '#include "(runtime|nn|comm|train)/' "$prefix/include/tandem"; then
  echo "installed headers above include without the tandem/ prefix" >&2
  exit 1
fi

# The programs, from the prefix: --help; a 1-step run and its chart where the data set and gnuplot
# are installed; tandem-serve starts and picks the tandem-train beside it.
bin=$prefix/bin
for p in tandem-train tandem-serve tandem-plot; do
  "$bin/$p" --help >"$work/$p.help" 2>&1 || { echo "installed $p --help failed:" >&2; cat "$work/$p.help" >&2; exit 1; }
done
if [[ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]]; then
  (cd "$work" && "$bin/tandem-train" --max-steps 1 --no-eval --threads 1 --metrics metrics.jsonl >train.log 2>&1) ||
    { echo "installed tandem-train: a 1-step run failed:" >&2; cat "$work/train.log" >&2; exit 1; }
  if command -v gnuplot >/dev/null; then
    "$bin/tandem-plot" "$work/metrics.jsonl" -o "$work/metrics.png" >"$work/plot.log" 2>&1 && [[ -s $work/metrics.png ]] ||
      { echo "installed tandem-plot failed:" >&2; cat "$work/plot.log" >&2; exit 1; }
  fi
fi
"$bin/tandem-serve" --port 0 --state-dir "$work/serve-state" >"$work/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 100); do grep -q listening "$work/serve.log" && break; sleep 0.1; done
kill "$serve_pid" 2>/dev/null || true
wait "$serve_pid" || true
grep -qF "tandem-train $bin/tandem-train)" "$work/serve.log" ||
  { echo "installed tandem-serve did not start with the tandem-train beside it:" >&2; cat "$work/serve.log" >&2; exit 1; }

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
# With pkg-config, as the READMEs say, and nothing more: its Libs carry the rpath.
c++ -std=c++17 -O2 $cflags "$src/examples/cpp/train_ddp.cpp" -o "$work/train_ddp_pc" $(pkg-config --libs tandem)
for n in 1 2; do
  "$mpiexec" -np "$n" "$work/cmake-build/train_ddp" 200
done
"$mpiexec" -np 1 "$work/train_ddp_pc" 50 >/dev/null
# A model of one's own through the engine: DDP on 2 ranks, and a resume from a checkpoint of that run
# ends with the same weights (param_hash) as the run that never stopped.
rm -rf "$work/custom-ckpt"
full=$("$mpiexec" -np 2 "$work/cmake-build/custom_model" 300 --save "$work/custom-ckpt" |
       grep -o 'custom_model: .*')
resumed=$("$mpiexec" -np 2 "$work/cmake-build/custom_model" 300 \
          --resume "$work/custom-ckpt/ckpt-00000250" | grep -o 'custom_model: .*')
echo "$full"
[[ $full == *"test accuracy 0.9"* && ${full##*param_hash } == "${resumed##*param_hash }" ]] ||
  { echo "custom_model: the resumed run ($resumed) differs from the full one ($full), or it did not learn" >&2; exit 1; }

if [[ -e $prefix/include/tandem/tandem_c.h ]]; then
  cmake -S "$src/examples/c" -B "$work/c-build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$work/c-build" >/dev/null
  for n in 1 2; do
    "$mpiexec" -np "$n" "$work/c-build/heat_surrogate" \
      "$src/examples/c/heat_surrogate.yaml" 400
  done
fi
if [[ -e $prefix/include/tandem/fortran/tandem.mod ]]; then
  cmake -S "$src/examples/fortran" -B "$work/f-build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
    >/dev/null
  cmake --build "$work/f-build" >/dev/null
  for n in 1 2; do
    "$mpiexec" -np "$n" "$work/f-build/heat_surrogate_f" \
      "$src/examples/fortran/heat_surrogate.yaml" 400
  done
fi
echo "installed package: programs, headers, find_package and pkg-config builds, examples on 1 and 2 ranks: ok"
