# Install rules of the blockrnn package (included by the top-level CMakeLists.txt when
# BLOCKRNN_INSTALL is on):
#   lib/libblockrnn.{a,so}                       the library (static or shared: BUILD_SHARED_LIBS)
#   include/blockrnn/*.h                         the public headers, version.h and export.h
#   lib/cmake/blockrnn/blockrnnConfig*.cmake     find_package(blockrnn CONFIG) -> blockrnn::blockrnn
#   lib/pkgconfig/blockrnn.pc                    pkg-config --cflags --libs blockrnn
include(CMakePackageConfigHelpers)

set(BLOCKRNN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/blockrnn)

install(TARGETS blockrnn EXPORT blockrnnTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/blockrnn
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")
install(FILES ${BLOCKRNN_GENERATED_INCLUDE}/blockrnn/version.h
              ${BLOCKRNN_GENERATED_INCLUDE}/blockrnn/export.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/blockrnn)
install(EXPORT blockrnnTargets
  NAMESPACE blockrnn::
  DESTINATION ${BLOCKRNN_CMAKE_DIR})

# A static libblockrnn leaves OpenMP's runtime to the final link, so its package must find
# OpenMP; a shared one has linked it already.
if(BLOCKRNN_LIBRARY_TYPE STREQUAL "STATIC_LIBRARY")
  set(BLOCKRNN_CONFIG_DEPENDENCIES "find_dependency(OpenMP COMPONENTS CXX)")
  set(BLOCKRNN_PC_CFLAGS "-DBLOCKRNN_STATIC_DEFINE")
  set(BLOCKRNN_PC_LIBS_PRIVATE "${OpenMP_CXX_FLAGS} -lstdc++ -lm")
else()
  set(BLOCKRNN_CONFIG_DEPENDENCIES "")
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
install(FILES ${PROJECT_BINARY_DIR}/blockrnn.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
