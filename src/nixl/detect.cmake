# Finding NIXL for libplugin_TPX.so (included by the top-level CMakeLists.txt,
# whose scope then enables C++): NIXL_PREFIX (cache variable or environment;
# scripts/build-testdeps.sh prints one), else pkg-config's nixl. Sets
# TPX_NIXL_FOUND, NIXL_PREFIX_FOUND, TPX_NIXL_INCLUDES, TPX_NIXL_LIBS; when
# not found, one line says why.
set(NIXL_PREFIX "$ENV{NIXL_PREFIX}" CACHE PATH "NIXL install prefix (for libplugin_TPX.so)")

set(TPX_NIXL_FOUND OFF)
set(_why "no NIXL_PREFIX and no pkg-config nixl")
if(TPX_SANITIZE)
  set(_why "sanitizer builds do not load into an uninstrumented NIXL")
elseif(NIXL_PREFIX)
  if(EXISTS "${NIXL_PREFIX}/include/backend/backend_plugin.h")
    find_library(TPX_NIXL_LIB nixl PATHS "${NIXL_PREFIX}/lib" NO_DEFAULT_PATH)
    find_library(TPX_NIXL_COMMON_LIB nixl_common PATHS "${NIXL_PREFIX}/lib" NO_DEFAULT_PATH)
    if(TPX_NIXL_LIB AND TPX_NIXL_COMMON_LIB)
      set(TPX_NIXL_FOUND ON)
      set(TPX_NIXL_INCLUDES "${NIXL_PREFIX}/include" "${NIXL_PREFIX}/include/utils"
                            "${NIXL_PREFIX}/include/utils/common"
                            "${NIXL_PREFIX}/include/utils/serdes" "${NIXL_PREFIX}/include/backend")
      find_library(TPX_NIXL_BUILD_LIB nixl_build PATHS "${NIXL_PREFIX}/lib" NO_DEFAULT_PATH)
      set(TPX_NIXL_LIBS ${TPX_NIXL_LIB} ${TPX_NIXL_COMMON_LIB} ${TPX_NIXL_BUILD_LIB})
    else()
      set(_why "NIXL_PREFIX=${NIXL_PREFIX} has no libnixl/libnixl_common")
    endif()
  else()
    set(_why "NIXL_PREFIX=${NIXL_PREFIX} has no include/backend/backend_plugin.h")
  endif()
else()
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(TPX_PC_NIXL QUIET nixl)
    if(TPX_PC_NIXL_FOUND)
      set(TPX_NIXL_FOUND ON)
      set(NIXL_PREFIX "${TPX_PC_NIXL_PREFIX}")
      set(TPX_NIXL_INCLUDES ${TPX_PC_NIXL_INCLUDE_DIRS})
      set(TPX_NIXL_LIBS ${TPX_PC_NIXL_LINK_LIBRARIES})
    endif()
  endif()
endif()

# NIXL's headers log through abseil (absl_log): the one NIXL was built with.
if(TPX_NIXL_FOUND)
  find_package(PkgConfig REQUIRED)
  set(_pcp "$ENV{PKG_CONFIG_PATH}")
  set(ENV{PKG_CONFIG_PATH} "${NIXL_PREFIX}/lib/pkgconfig:${_pcp}")
  pkg_check_modules(TPX_ABSL_LOG QUIET absl_log absl_log_internal_message absl_log_internal_check_op)
  set(ENV{PKG_CONFIG_PATH} "${_pcp}")
  if(NOT TPX_ABSL_LOG_FOUND)
    set(TPX_NIXL_FOUND OFF)
    set(_why "abseil's absl_log (NIXL's logging) not found under ${NIXL_PREFIX}/lib/pkgconfig")
  endif()
endif()

set(NIXL_PREFIX_FOUND "${NIXL_PREFIX}")
list(APPEND TPX_NIXL_INCLUDES ${TPX_ABSL_LOG_INCLUDE_DIRS})
list(APPEND TPX_NIXL_LIBS ${TPX_ABSL_LOG_LINK_LIBRARIES})
if(TPX_NIXL_FOUND)
  message(STATUS "tpx: NIXL plugin (libplugin_TPX.so) against NIXL in ${NIXL_PREFIX}")
else()
  message(STATUS "tpx: NIXL plugin (libplugin_TPX.so) skipped: ${_why}")
  set(TPX_NIXL_WHY "${_why}")
endif()

