# `cmake --install build [--prefix P]`: the public headers, libtpx.so (soname
# libtpx.so.MAJOR.MINOR while 0.x) and libtpx.a, the tools, the NCCL plugin,
# tpx.pc for pkg-config and the CMake package tpx (find_package(tpx) ->
# tpx::tpx). tests/install checks all of it against a temporary prefix.

# Installed binaries find the CUDA runtime where they were linked against it.
set_target_properties(tpx_shared PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)

install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/tpx DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(TARGETS tpx tpx_shared EXPORT tpxTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
foreach(src ${TPX_TOOL_SOURCES})
  get_filename_component(name ${src} NAME_WE)
  set_target_properties(${name} PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
  install(TARGETS ${name} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endforeach()
if(TARGET nccl-net-tpx)
  # NCCL looks the plugin up by this exact name (libnccl-net-tpx.so): no soname version.
  set_target_properties(nccl-net-tpx PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
  install(TARGETS nccl-net-tpx LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()

# pkg-config: Libs.private is what a static link (`pkg-config --static`)
# needs beyond libtpx.a: threads, libdl and, in a CUDA build, the CUDA
# runtime (the GPU data path and the unpack kernels call it) and the C++
# runtime that nvcc's objects use; with the etcd rendezvous libcurl and jansson.
set(TPX_PC_PRIVATE "-lpthread -lcrypto")
if(CMAKE_DL_LIBS)
  string(APPEND TPX_PC_PRIVATE " -l${CMAKE_DL_LIBS}")
endif()
if(TPX_HAVE_ETCD)
  string(APPEND TPX_PC_PRIVATE " -lcurl -ljansson") # the rendezvous (src/rendezvous/etcd.c)
endif()
if(TPX_HAVE_CUDA)
  get_filename_component(TPX_CUDART_DIR ${CUDA_cudart_LIBRARY} DIRECTORY)
  string(APPEND TPX_PC_PRIVATE " -L${TPX_CUDART_DIR} -Wl,-rpath,${TPX_CUDART_DIR} -lcudart -lstdc++")
endif()
# Relative to the .pc file's own place, so a moved prefix still works.
file(RELATIVE_PATH TPX_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" TPX_PC_TO_PREFIX "${TPX_PC_TO_PREFIX}")
configure_file(${CMAKE_SOURCE_DIR}/cmake/tpx.pc.in ${CMAKE_BINARY_DIR}/tpx.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/tpx.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# CMake package: tpx::shared, tpx::static and tpx::tpx (shared unless
# TPX_STATIC is set true before find_package).
include(CMakePackageConfigHelpers)
set(TPX_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/tpx)
install(EXPORT tpxTargets NAMESPACE tpx:: DESTINATION ${TPX_CMAKE_DIR})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/tpxConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/tpxConfig.cmake INSTALL_DESTINATION ${TPX_CMAKE_DIR})
# 0.x: only the same MAJOR.MINOR is compatible (like the soname).
write_basic_package_version_file(${CMAKE_BINARY_DIR}/tpxConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/tpxConfig.cmake ${CMAKE_BINARY_DIR}/tpxConfigVersion.cmake
        DESTINATION ${TPX_CMAKE_DIR})
