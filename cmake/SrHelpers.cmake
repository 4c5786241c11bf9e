# Helpers shared by every folder: warnings, sanitizers, libraries and tests
# with explicit source lists (no file(GLOB)).

set(SR_WARNINGS -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
    -Wformat=2 -Wno-unused-parameter)
# Clang flags "a" "b" in an array initializer as a missing comma; our
# multi-line SQL strings are concatenated on purpose.
if(CMAKE_C_COMPILER_ID MATCHES "Clang")
  list(APPEND SR_WARNINGS -Wno-string-concatenation)
endif()
if(SYNCREP_WERROR)
  list(APPEND SR_WARNINGS -Werror)
endif()

# Hot loops must vectorise: GCC 12 at -O2 leaves `acc[i] += g[i]` scalar.
set(SR_OPT_FLAGS "$<$<CONFIG:Release>:-O3>" "$<$<CONFIG:RelWithDebInfo>:-O3>")

if(SYNCREP_SANITIZE)
  set(SR_SAN_FLAGS -fsanitize=${SYNCREP_SANITIZE} -fno-omit-frame-pointer
      -fno-sanitize-recover=all)
  add_compile_options(${SR_SAN_FLAGS})
  add_link_options(${SR_SAN_FLAGS})
endif()

# sr_add_library(name SOURCES ... [DEPS ...] [PRIVATE_DEPS ...])
# One static library per component folder, built from an OBJECT library
# `name_obj` so worker/ can also put the objects into the shared and static
# libsyncrep.  Only include/ (the public API) is a public include directory;
# the repository root, from which a component includes another's internal
# header ("store/store.h"), is private to each target that asks for it
# (libraries, sr_add_executable, sr_add_unit_test).  libsyncrep's objects
# are built with hidden symbols (sr_hide_symbols, top-level CMakeLists.txt).
function(sr_add_library name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${name}_obj OBJECT ${A_SOURCES})
  target_include_directories(${name}_obj
    PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(${name}_obj PRIVATE ${SR_WARNINGS} ${SR_OPT_FLAGS})
  target_compile_definitions(${name}_obj PRIVATE _GNU_SOURCE)
  if(A_DEPS)
    target_link_libraries(${name}_obj PUBLIC ${A_DEPS})
  endif()
  if(A_PRIVATE_DEPS)
    target_link_libraries(${name}_obj PRIVATE ${A_PRIVATE_DEPS})
  endif()
  add_library(${name} STATIC)
  target_link_libraries(${name} PUBLIC ${name}_obj)
endfunction()

# sr_add_executable(name SOURCES ... [DEPS ...])
function(sr_add_executable name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  target_compile_options(${name} PRIVATE ${SR_WARNINGS} ${SR_OPT_FLAGS})
  target_compile_definitions(${name} PRIVATE _GNU_SOURCE)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(${name} PRIVATE ${A_DEPS})
endfunction()

# sr_add_unit_test(name SOURCES ... [DEPS ...] [LABELS ...] [TIMEOUT s])
# A cmocka test executable registered with ctest.  The label defaults to `unit`.
function(sr_add_unit_test name)
  cmake_parse_arguments(A "" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  if(NOT A_LABELS)
    set(A_LABELS unit)
  endif()
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 120)
  endif()
  add_executable(${name} ${A_SOURCES})
  target_compile_options(${name} PRIVATE ${SR_WARNINGS} -Wno-missing-prototypes)
  target_compile_definitions(${name} PRIVATE _GNU_SOURCE
    SR_BUILD_DIR="${PROJECT_BINARY_DIR}"
    SR_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    SR_SYNCREP_BIN="$<TARGET_FILE:syncrep>")
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}
    ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/tests/support)
  target_link_libraries(${name} PRIVATE sr_test_support ${A_DEPS} SR::cmocka)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS "${A_LABELS}" TIMEOUT ${A_TIMEOUT})
endfunction()

# sr_hide_symbols(target...): build these OBJECT libraries with
# -fvisibility=hidden: only what the public headers mark SR_API
# (include/syncrep/export.h) is exported from a shared library made of
# them, so libsyncrep.so exports the API alone.  Static libraries of the
# same objects still link everything (the tests that need internals).
function(sr_hide_symbols)
  foreach(t ${ARGN})
    if(TARGET ${t})
      set_target_properties(${t} PROPERTIES C_VISIBILITY_PRESET hidden)
    endif()
  endforeach()
endfunction()
