# Install rules of the blockrnn package (included by the top-level CMakeLists.txt when
# BLOCKRNN_INSTALL is on):
#   lib/libblockrnn.{a,so}                       the library (static or shared: BUILD_SHARED_LIBS)
#   include/blockrnn/*.h                         the public headers, version.h and export.h
#   lib/cmake/blockrnn/blockrnnConfig*.cmake     find_package(blockrnn CONFIG) -> blockrnn::blockrnn
#   lib/pkgconfig/blockrnn.pc                    pkg-config --cflags --libs blockrnn (C and C++)
#   lib/pkgconfig/blockrnn-cxx.pc                blockrnn.pc plus -std=c++20, for the C++ API
# The Java binding (java/CMakeLists.txt) and the CLI (tools/CMakeLists.txt) add their own rules:
# share/java/blockrnn.jar, lib/libblockrnn_jni.so and bin/blockrnn.
# include/blockrnn/cuda.h is not installed: it declares the CUDA backend, whose library
# (blockrnn_cuda) has no install rules yet, so an installed cuda.h would have nothing to link.
include(CMakePackageConfigHelpers)

set(BLOCKRNN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/blockrnn)

install(TARGETS blockrnn EXPORT blockrnnTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/blockrnn
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h"
  PATTERN "cuda.h" EXCLUDE)
install(FILES ${BLOCKRNN_GENERATED_INCLUDE}/blockrnn/version.h
              ${BLOCKRNN_GENERATED_INCLUDE}/blockrnn/export.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/blockrnn)
install(EXPORT blockrnnTargets
  NAMESPACE blockrnn::
  DESTINATION ${BLOCKRNN_CMAKE_DIR})

# A static libblockrnn leaves OpenMP's runtime and the C++ runtime to the final link. Its
# imported target links blockrnn::link_dependencies, which the package config defines when it is
# loaded (cmake/blockrnnConfig.cmake.in): OpenMP found for the consumer's CXX, or, in a project
# with C only, for its C, plus the C++ runtime libraries (CMake adds those itself only where CXX
# is enabled). A shared libblockrnn has linked both already.
# The C++ runtime libraries are those the C++ compiler's driver adds (libstdc++, libm for g++),
# less the ones every C driver adds too.
set(BLOCKRNN_CXX_RUNTIME_LIBRARIES ${CMAKE_CXX_IMPLICIT_LINK_LIBRARIES})
list(REMOVE_ITEM BLOCKRNN_CXX_RUNTIME_LIBRARIES c gcc gcc_s)
list(REMOVE_DUPLICATES BLOCKRNN_CXX_RUNTIME_LIBRARIES)
if(BLOCKRNN_LIBRARY_TYPE STREQUAL "STATIC_LIBRARY")
  target_link_libraries(blockrnn INTERFACE $<INSTALL_INTERFACE:blockrnn::link_dependencies>)
  set(BLOCKRNN_CONFIG_STATIC TRUE)
  set(BLOCKRNN_PC_CFLAGS "-DBLOCKRNN_STATIC_DEFINE")
  # pkg-config --static: OpenMP's libraries by name (-lgomp -lpthread for GCC), then the C++
  # runtime's (-lstdc++ -lm).
  set(BLOCKRNN_PC_LIBS_PRIVATE "")
  foreach(_lib IN LISTS OpenMP_CXX_LIB_NAMES BLOCKRNN_CXX_RUNTIME_LIBRARIES)
    string(APPEND BLOCKRNN_PC_LIBS_PRIVATE " -l${_lib}")
  endforeach()
  string(STRIP "${BLOCKRNN_PC_LIBS_PRIVATE}" BLOCKRNN_PC_LIBS_PRIVATE)
else()
  set(BLOCKRNN_CONFIG_STATIC FALSE)
  set(BLOCKRNN_PC_CFLAGS "")
  set(BLOCKRNN_PC_LIBS_PRIVATE "")
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/blockrnnConfig.cmake.in
  ${PROJECT_BINARY_DIR}/blockrnnConfig.cmake
  INSTALL_DESTINATION ${BLOCKRNN_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/blockrnnConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/blockrnnConfig.cmake
              ${PROJECT_BINARY_DIR}/blockrnnConfigVersion.cmake
  DESTINATION ${BLOCKRNN_CMAKE_DIR})

# pkg-config: the prefix is found from the .pc file's own place (${pcfiledir}), so that
# `cmake --install --prefix P` and a moved tree both work.
set(BLOCKRNN_PC_PREFIX "\${pcfiledir}")
string(REPLACE "/" ";" _blockrnn_pc_parts "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
foreach(_part IN LISTS _blockrnn_pc_parts)
  if(NOT _part STREQUAL "")
    string(APPEND BLOCKRNN_PC_PREFIX "/..")
  endif()
endforeach()
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(BLOCKRNN_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  set(BLOCKRNN_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(BLOCKRNN_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(BLOCKRNN_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/blockrnn.pc.in ${PROJECT_BINARY_DIR}/blockrnn.pc @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/cmake/blockrnn-cxx.pc.in ${PROJECT_BINARY_DIR}/blockrnn-cxx.pc
               @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/blockrnn.pc ${PROJECT_BINARY_DIR}/blockrnn-cxx.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
