# The CUDA backend (docs/cuda.md). BLOCKRNN_CUDA defaults to ON when CMake finds a CUDA compiler
# (check_language(CUDA): nvcc on PATH, $CUDACXX or CMAKE_CUDA_COMPILER) in a top-level build
# that is neither the Python wheel (pyproject.toml builds with BLOCKRNN_BUILD_PYTHON=ON, so the
# wheel stays CPU-only for now) nor a sanitizer or fuzzing build; -DBLOCKRNN_CUDA=OFF forces it
# off. Building needs no GPU: nvcc, cudart and cuBLAS compile and link on any machine.
#
# Architectures: CMAKE_CUDA_ARCHITECTURES defaults to "90;90a" (H100/H200: sm_90 code, and the
# Hopper-specific sm_90a code, which needs CUDA >= 12.0, as the backend does), keeping CI's
# compile time small. Set it yourself for more, e.g. -DCMAKE_CUDA_ARCHITECTURES="80;90" (A100 and H100), or "native"
# on a machine with a GPU.
#
# Compile gates: ptxas fails the build on a register spill or any local memory use
# (-warn-spills, -warn-lmem-usage, -Werror): a kernel that spills is slower than it looks, and
# the element-wise kernels have no reason to use local memory.
#
# The Python extension: BLOCKRNN_PYTHON_CUDA (OFF, ON or EMU) links the backend (ON, which turns
# BLOCKRNN_CUDA on) or its host emulation (EMU, which turns BLOCKRNN_CUDA_EMU on) into the
# extension: `pip install . -C cmake.define.BLOCKRNN_PYTHON_CUDA=ON` (docs/cuda.md, "Python").
set(BLOCKRNN_PYTHON_CUDA OFF CACHE STRING
    "The Python extension's CUDA backend: OFF, ON (blockrnn_cuda, nvcc) or EMU (host emulation)")
set_property(CACHE BLOCKRNN_PYTHON_CUDA PROPERTY STRINGS OFF ON EMU)
if(NOT BLOCKRNN_PYTHON_CUDA MATCHES "^(OFF|ON|EMU)$")
  message(FATAL_ERROR "BLOCKRNN_PYTHON_CUDA must be OFF, ON or EMU, got '${BLOCKRNN_PYTHON_CUDA}'")
endif()
include(CheckLanguage)
check_language(CUDA)
set(_blockrnn_cuda_default OFF)
if(CMAKE_CUDA_COMPILER AND PROJECT_IS_TOP_LEVEL AND NOT BLOCKRNN_BUILD_PYTHON
   AND NOT BLOCKRNN_SANITIZE AND NOT BLOCKRNN_FUZZ)
  set(_blockrnn_cuda_default ON)
endif()
option(BLOCKRNN_CUDA "Build the CUDA backend (blockrnn_cuda) and its tests" ${_blockrnn_cuda_default})
if(BLOCKRNN_BUILD_PYTHON AND BLOCKRNN_PYTHON_CUDA STREQUAL "ON")
  set(BLOCKRNN_CUDA ON CACHE BOOL "Build the CUDA backend (blockrnn_cuda) and its tests" FORCE)
endif()

if(BLOCKRNN_CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    message(FATAL_ERROR "BLOCKRNN_CUDA is ON but no CUDA compiler was found (set CUDACXX or "
                        "CMAKE_CUDA_COMPILER, or pass -DBLOCKRNN_CUDA=OFF)")
  endif()
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90 90a)
  endif()
  enable_language(CUDA)
  if(CMAKE_CUDA_COMPILER_VERSION VERSION_LESS 12.0)
    message(FATAL_ERROR "BLOCKRNN_CUDA needs CUDA >= 12.0 (cublasGemmEx_64, cudaMallocAsync, "
                        "sm_90a); found nvcc ${CMAKE_CUDA_COMPILER_VERSION} (or pass "
                        "-DBLOCKRNN_CUDA=OFF)")
  endif()
  # The kernels need C++17 only (CMake 3.25 knows no C++20 flag for nvcc 13).
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)
  # Two translation units: the entry points and validation (host C++, the project's compiler)
  # and the kernels (nvcc, each template instantiated once for float and double).
  add_library(blockrnn_cuda STATIC
    ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/api.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/kernels.cu
    ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/persistent_lstm.cu)
  target_include_directories(blockrnn_cuda PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  # -fmad=false: device arithmetic in the CPU reference's groupings, never contracted into FMAs
  # (as -ffp-contract=off on the host); cuBLAS's GEMMs are unaffected.
  target_compile_options(blockrnn_cuda PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-fmad=false>
    "$<$<COMPILE_LANGUAGE:CUDA>:SHELL:-Xptxas -warn-spills,-warn-lmem-usage,-Werror>"
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -ffp-contract=off>)
  # It reuses the CPU library's validation (internal functions), hence blockrnn_internal.
  target_link_libraries(blockrnn_cuda PUBLIC blockrnn_internal CUDA::cudart CUDA::cublas)
  add_library(blockrnn::cuda ALIAS blockrnn_cuda)
  message(STATUS "blockrnn: CUDA backend ON (architectures ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "blockrnn: CUDA backend OFF")
endif()
