# Run by `cmake --install`: in the installed headers, #include "runtime/...", "nn/...", "comm/..." and "train/..."
# become "tandem/runtime/..." and so on, the names a consumer's include path (P/include) resolves.
set(_dir "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/${TANDEM_INSTALLED_HEADERS}")
file(GLOB_RECURSE _headers "${_dir}/*.h")
foreach(_h ${_headers})
  file(READ "${_h}" _text)
  string(REGEX REPLACE "#include \"(runtime|nn|comm|train)/" "#include \"tandem/\\1/" _new "${_text}")
  if(NOT _new STREQUAL _text)
    file(WRITE "${_h}" "${_new}")
  endif()
endforeach()
