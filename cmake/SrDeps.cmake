# Third-party dependencies.  SQLite via FindSQLite3; libzmq, xxHash and cmocka via
# pkg-config (libzmq ships no CMake config, cmocka's defines no target);
# CUDA + NCCL optional (SYNCREP_CUDA=AUTO|ON|OFF).
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(SQLite3 REQUIRED)
pkg_check_modules(ZMQ REQUIRED IMPORTED_TARGET libzmq>=4.3)
add_library(SR::zmq ALIAS PkgConfig::ZMQ)
# xxHash (XXH3_64bits): the store's chunk checksums (docs/store.md, "Checksums").
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash>=0.8)
add_library(SR::xxhash ALIAS PkgConfig::XXHASH)
# libmicrohttpd: the coordinator's Prometheus endpoint, --metrics-bind (docs/metrics.md).
pkg_check_modules(MICROHTTPD REQUIRED IMPORTED_TARGET libmicrohttpd>=0.9.71)
add_library(SR::microhttpd ALIAS PkgConfig::MICROHTTPD)
if(SYNCREP_TESTS)
  pkg_check_modules(CMOCKA REQUIRED IMPORTED_TARGET cmocka)
  add_library(SR::cmocka ALIAS PkgConfig::CMOCKA)
endif()

set(SR_HAVE_CUDA OFF)
if(NOT SYNCREP_CUDA STREQUAL "OFF")
  if(NOT DEFINED CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    get_filename_component(_sr_cuda_root "${CUDAToolkit_LIBRARY_DIR}" DIRECTORY)
    find_path(NCCL_INCLUDE_DIR nccl.h
      HINTS ${CUDAToolkit_INCLUDE_DIRS} ${_sr_cuda_root}/include ENV NCCL_ROOT
      PATH_SUFFIXES include)
    find_library(NCCL_LIBRARY nccl
      HINTS ${CUDAToolkit_LIBRARY_DIR} ${_sr_cuda_root}/lib64 ENV NCCL_ROOT
      PATH_SUFFIXES lib lib64)
  endif()
  if(CUDAToolkit_FOUND AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(SR_HAVE_CUDA ON)
    add_library(SR::nccl UNKNOWN IMPORTED)
    set_target_properties(SR::nccl PROPERTIES IMPORTED_LOCATION ${NCCL_LIBRARY}
      INTERFACE_INCLUDE_DIRECTORIES ${NCCL_INCLUDE_DIR})
    message(STATUS "syncrep: CUDA ${CUDAToolkit_VERSION} and NCCL (${NCCL_LIBRARY}) found")
  elseif(SYNCREP_CUDA STREQUAL "ON")
    message(FATAL_ERROR "SYNCREP_CUDA=ON but the CUDA toolkit or NCCL was not found "
      "(set CUDAToolkit_ROOT / NCCL_ROOT)")
  else()
    message(STATUS "syncrep: CUDA/NCCL not found, building the host backend only")
  endif()
endif()
