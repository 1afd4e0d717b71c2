# The host emulation of the CUDA backend (docs/cuda.md, "Host emulation"): the real
# src/cuda/api.cpp and src/cuda/kernels.cu compiled by the host compiler (no nvcc, no CUDA
# toolkit) against a stand-in CUDA runtime and cuBLAS (src/cuda/emu/) that check the APIs'
# argument rules and poison every allocation, so that every op's device code is tested on every
# CI run by tests/cuda (blockrnn_cuda_emu_tests). BLOCKRNN_CUDA_EMU defaults to ON wherever the
# tests are built (also in the asan-ubsan preset); the library is for the tests only.
option(BLOCKRNN_CUDA_EMU "Build the host emulation of the CUDA backend and its tests"
       ${BLOCKRNN_BUILD_TESTS})
# The Python extension on the emulation (BLOCKRNN_PYTHON_CUDA=EMU, for the device-array tests).
if(BLOCKRNN_BUILD_PYTHON AND BLOCKRNN_PYTHON_CUDA STREQUAL "EMU")
  set(BLOCKRNN_CUDA_EMU ON CACHE BOOL "Build the host emulation of the CUDA backend and its tests"
      FORCE)
endif()

if(BLOCKRNN_CUDA_EMU)
  set(_emu ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/emu)
  add_library(blockrnn_cuda_emu STATIC
    ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/api.cpp
    ${_emu}/kernels_host.cpp
    ${_emu}/persistent_lstm_host.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/persistent_host.cpp
    ${_emu}/runtime.cpp
    ${_emu}/cublas.cpp)
  # The stand-in headers (cuda_runtime_api.h, cublas_v2.h, cuda_fp16.h) take the toolkit's place
  # for this library and whoever links it (blockrnn/cuda.h includes cuda_runtime_api.h).
  target_include_directories(blockrnn_cuda_emu
    PUBLIC ${_emu}/include
    PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  target_compile_definitions(blockrnn_cuda_emu PUBLIC BLOCKRNN_CUDA_HOST_EMU)
  # -ffp-contract=off: the kernels' arithmetic in the reference's groupings, as nvcc's
  # -fmad=false does for the real backend.
  target_compile_options(blockrnn_cuda_emu PRIVATE -Wall -Wextra -ffp-contract=off)
  # The stand-in GEMM is optimised in every build type (the project's per-ISA files do the same),
  # so that the emulated tests stay quick in the Debug sanitizer build; it is still instrumented.
  set_source_files_properties(${_emu}/cublas.cpp PROPERTIES COMPILE_OPTIONS "-O2")
  target_link_libraries(blockrnn_cuda_emu PUBLIC blockrnn_internal)
  message(STATUS "blockrnn: host emulation of the CUDA backend ON (blockrnn_cuda_emu_tests)")
endif()
