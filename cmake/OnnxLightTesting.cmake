# Test machinery shared by c_tests/ and examples/ (included by the top-level CMakeLists.txt when
# BUILD_TESTING is ON): the tools (Valgrind, ASan + UBSan, Python with onnx) and onnxl_c_test().
#
# Every test program is compiled with -Wall -Wextra -Wpedantic -Werror (C11 / C++17) and runs
# three times:
#   <name>           plainly,
#   <name>.valgrind  under Valgrind memcheck (any error or definite/indirect leak fails the test),
#   <name>.asan      rebuilt with -fsanitize=address,undefined (any finding fails the test).
# ctest -L valgrind / -L asan / -L plain selects one kind. A missing tool is a configure error
# (turn the option off to go without it), never a silently skipped test.
#
# Multi-threaded tests (onnxl_c_test(... TSAN)) also run as <name>.tsan, built with
# -fsanitize=thread (ONNXL_TEST_TSAN), and as <name>.helgrind under Valgrind's Helgrind
# (ONNXL_TEST_VALGRIND): any data race report fails the test. The Rust library is not
# instrumented for ThreadSanitizer, which sees the C side (the test's own memory accesses and
# the functions it intercepts: malloc/free, memcpy/memcmp, pthread_*); Helgrind sees every
# access, Rust's included. See docs/hardening.md, "Sanitizers".

option(ONNXL_TEST_VALGRIND "Also run every C/C++ test under Valgrind (requires valgrind)" ON)
option(ONNXL_TEST_SANITIZERS "Also run every C/C++ test built with ASan + UBSan" ON)
option(ONNXL_TEST_TSAN "Also run the multi-threaded C tests built with ThreadSanitizer" ON)
option(ONNXL_TEST_PYTHON "Run the tests that need Python with onnx and numpy (walker inputs, ctypes example)" ON)

set(ONNXL_SAMPLE_MODEL "${PROJECT_SOURCE_DIR}/samples/mlp.onnx")
set(ONNXL_TESTING_DIR "${CMAKE_CURRENT_LIST_DIR}")
set(ONNXL_TEST_TMP "${PROJECT_BINARY_DIR}/test-tmp")
file(MAKE_DIRECTORY "${ONNXL_TEST_TMP}")
set(ONNXL_C_WARNINGS -Wall -Wextra -Wpedantic -Werror)

find_package(Threads REQUIRED)

if(ONNXL_TEST_VALGRIND)
  find_program(ONNXL_VALGRIND valgrind)
  if(NOT ONNXL_VALGRIND)
    message(FATAL_ERROR "valgrind not found (install it, e.g. apt-get install valgrind, or configure with "
                        "-DONNXL_TEST_VALGRIND=OFF)")
  endif()
  set(ONNXL_VALGRIND_COMMAND "${ONNXL_VALGRIND}" -q --error-exitcode=99 --leak-check=full
      --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect
      "--suppressions=${CMAKE_CURRENT_LIST_DIR}/valgrind.supp")
endif()

if(ONNXL_TEST_SANITIZERS)
  set(ONNXL_SANITIZE_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  include(CheckCSourceRuns)
  set(CMAKE_REQUIRED_FLAGS "-fsanitize=address,undefined")
  set(CMAKE_REQUIRED_LINK_OPTIONS "-fsanitize=address,undefined")
  check_c_source_runs("int main(void) { return 0; }" ONNXL_HAVE_ASAN_UBSAN)
  unset(CMAKE_REQUIRED_FLAGS)
  unset(CMAKE_REQUIRED_LINK_OPTIONS)
  if(NOT ONNXL_HAVE_ASAN_UBSAN)
    message(FATAL_ERROR "${CMAKE_C_COMPILER} cannot build and run -fsanitize=address,undefined programs "
                        "(install libasan/libubsan, or configure with -DONNXL_TEST_SANITIZERS=OFF)")
  endif()
  set(ONNXL_SANITIZER_ENV
      "ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=98"
      "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
endif()

if(ONNXL_TEST_TSAN)
  set(ONNXL_TSAN_FLAGS -fsanitize=thread -fno-omit-frame-pointer)
  include(CheckCSourceRuns)
  set(CMAKE_REQUIRED_FLAGS "-fsanitize=thread")
  set(CMAKE_REQUIRED_LINK_OPTIONS "-fsanitize=thread")
  check_c_source_runs("int main(void) { return 0; }" ONNXL_HAVE_TSAN)
  unset(CMAKE_REQUIRED_FLAGS)
  unset(CMAKE_REQUIRED_LINK_OPTIONS)
  if(NOT ONNXL_HAVE_TSAN)
    message(FATAL_ERROR "${CMAKE_C_COMPILER} cannot build and run -fsanitize=thread programs "
                        "(install libtsan, or configure with -DONNXL_TEST_TSAN=OFF)")
  endif()
  # No suppressions: a report is a failure.
  set(ONNXL_TSAN_ENV "TSAN_OPTIONS=halt_on_error=1:exitcode=97:second_deadlock_stack=1")
endif()

if(ONNXL_TEST_PYTHON)
  if(NOT Python3_EXECUTABLE)
    find_package(Python3 REQUIRED COMPONENTS Interpreter)
  endif()
  execute_process(
    COMMAND "${Python3_EXECUTABLE}" -c "import numpy, onnx, os; print(os.path.dirname(onnx.__file__))"
    RESULT_VARIABLE rc OUTPUT_VARIABLE onnx_dir ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${Python3_EXECUTABLE} cannot import onnx and numpy (use the test venv: "
                        "-DPython3_EXECUTABLE=.venv/bin/python, or -DONNXL_TEST_PYTHON=OFF):\n${err}")
  endif()
  if(NOT ONNXL_BACKEND_DATA_DIR)
    set(ONNXL_BACKEND_DATA_DIR "${onnx_dir}/backend/test/data" CACHE PATH
        "Directory of real .onnx models walked by the walker test (the onnx wheel's backend test data)")
  endif()
endif()
if(NOT ONNXL_BACKEND_DATA_DIR OR NOT IS_DIRECTORY "${ONNXL_BACKEND_DATA_DIR}")
  message(FATAL_ERROR "ONNXL_BACKEND_DATA_DIR (\"${ONNXL_BACKEND_DATA_DIR}\") is not a directory: point it "
                      "at <onnx package>/backend/test/data")
endif()

# onnxl_c_test(<name> SOURCES <files...> [ARGS <args...>] [LINK onnx_light|onnx_light_shared|onnx_light_static]
#              [LIBS <libs...>] [FIXTURES <fixture>] [EXE <program of another onnxl_c_test>] [TMP]
#              [SETUP <fixture>] [TSAN])
# Builds <name> (C11 or C++17 by source extension; or reuses the program EXE) and registers
# <name>, <name>.valgrind and <name>.asan (and, with TSAN, <name>.tsan). With TMP, the last argument is a temporary directory
# of each registered test (${ONNXL_TEST_TMP}/<test name>). SETUP: the plain test sets up this
# fixture (its TMP directory holds its output).
function(onnxl_c_test name)
  cmake_parse_arguments(T "TMP;TSAN" "LINK;FIXTURES;EXE;SETUP" "SOURCES;ARGS;LIBS" ${ARGN})
  set(program ${name})
  if(T_EXE)
    set(program ${T_EXE})
  endif()
  if(NOT T_LINK)
    set(T_LINK onnx_light)
  endif()
  set(variants plain)
  if(ONNXL_TEST_VALGRIND)
    list(APPEND variants valgrind)
  endif()
  if(ONNXL_TEST_SANITIZERS)
    list(APPEND variants asan)
  endif()
  if(ONNXL_TEST_TSAN AND T_TSAN)
    list(APPEND variants tsan)
  endif()
  if(ONNXL_TEST_VALGRIND AND T_TSAN)
    list(APPEND variants helgrind)
  endif()
  foreach(variant IN LISTS variants)
    set(exe ${program})
    if(variant STREQUAL "asan" OR variant STREQUAL "tsan")
      set(exe ${program}_${variant})
    endif()
    if(NOT TARGET ${exe})
      add_executable(${exe} ${T_SOURCES})
      onnxl_link(${exe} ${T_LINK})
      target_link_libraries(${exe} PRIVATE ${T_LIBS})
      target_include_directories(${exe} PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}" "${PROJECT_SOURCE_DIR}/c_tests")
      target_compile_options(${exe} PRIVATE ${ONNXL_C_WARNINGS})
      target_compile_definitions(${exe} PRIVATE ONNXL_EXPECTED_VERSION="${PROJECT_VERSION}")
      set_target_properties(${exe} PROPERTIES
        C_STANDARD 11 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF
        CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
      if(variant STREQUAL "asan")
        target_compile_options(${exe} PRIVATE ${ONNXL_SANITIZE_FLAGS})
        target_link_options(${exe} PRIVATE ${ONNXL_SANITIZE_FLAGS})
      elseif(variant STREQUAL "tsan")
        target_compile_options(${exe} PRIVATE ${ONNXL_TSAN_FLAGS})
        target_link_options(${exe} PRIVATE ${ONNXL_TSAN_FLAGS})
      endif()
    endif()
    if(variant STREQUAL "plain")
      set(test_name ${name})
      set(cmd $<TARGET_FILE:${exe}>)
    elseif(variant STREQUAL "valgrind")
      set(test_name ${name}.valgrind)
      set(cmd ${ONNXL_VALGRIND_COMMAND} $<TARGET_FILE:${exe}>)
    elseif(variant STREQUAL "helgrind")
      # Valgrind's default suppressions only (glibc internals); no project suppressions.
      set(test_name ${name}.helgrind)
      set(cmd "${ONNXL_VALGRIND}" -q --tool=helgrind --error-exitcode=99 $<TARGET_FILE:${exe}>)
    else()
      set(test_name ${name}.${variant})
      set(cmd $<TARGET_FILE:${exe}>)
    endif()
    set(args ${T_ARGS})
    set(required ${T_FIXTURES})
    if(T_TMP)
      set(tmp "${ONNXL_TEST_TMP}/${test_name}")
      file(MAKE_DIRECTORY "${tmp}")
      list(APPEND args "${tmp}")
      # Each run starts from an empty directory.
      add_test(NAME ${test_name}.fresh-tmp
               COMMAND "${CMAKE_COMMAND}" "-DDIR=${tmp}" -P "${ONNXL_TESTING_DIR}/FreshDir.cmake")
      set_tests_properties(${test_name}.fresh-tmp PROPERTIES LABELS setup
                           FIXTURES_SETUP tmp.${test_name})
      list(APPEND required tmp.${test_name})
    endif()
    add_test(NAME ${test_name} COMMAND ${cmd} ${args})
    set_tests_properties(${test_name} PROPERTIES LABELS "${variant};c_api" TIMEOUT 600)
    if(required)
      set_tests_properties(${test_name} PROPERTIES FIXTURES_REQUIRED "${required}")
    endif()
    if(variant STREQUAL "asan")
      set_tests_properties(${test_name} PROPERTIES ENVIRONMENT "${ONNXL_SANITIZER_ENV}")
    elseif(variant STREQUAL "tsan")
      set_tests_properties(${test_name} PROPERTIES ENVIRONMENT "${ONNXL_TSAN_ENV}")
    endif()
    if(T_SETUP AND variant STREQUAL "plain")
      set_tests_properties(${test_name} PROPERTIES FIXTURES_SETUP ${T_SETUP})
    endif()
  endforeach()
endfunction()

