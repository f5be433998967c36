# Helpers of the top-level CMakeLists.txt: the version from Cargo.toml, the cargo and rustc
# programs, and the native libraries a Rust static library needs.

# Sets ${out_var} to the project's version, [workspace.package] of the Cargo.toml at ${manifest}
# ("0.2.0").
function(onnxl_cargo_version manifest out_var)
  file(STRINGS "${manifest}" lines)
  set(in_package FALSE)
  foreach(line IN LISTS lines)
    if(line MATCHES "^\\[workspace\\.package\\]")
      set(in_package TRUE)
    elseif(line MATCHES "^\\[")
      set(in_package FALSE)
    elseif(in_package AND line MATCHES "^version[ \t]*=[ \t]*\"([0-9]+\\.[0-9]+\\.[0-9]+)[^\"]*\"")
      set(${out_var} "${CMAKE_MATCH_1}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  message(FATAL_ERROR "no [workspace.package] version in ${manifest}")
endfunction()

# Sets ${out_var} to the SONAME version of ${version}, following cargo-c: the major version, or
# "0.<minor>" before 1.0 (where a minor release may break the ABI).
function(onnxl_soversion version out_var)
  string(REPLACE "." ";" parts "${version}")
  list(GET parts 0 major)
  list(GET parts 1 minor)
  if(major EQUAL 0)
    set(${out_var} "0.${minor}" PARENT_SCOPE)
  else()
    set(${out_var} "${major}" PARENT_SCOPE)
  endif()
endfunction()

# Finds cargo ($CARGO, then PATH, then ~/.cargo/bin) and rustc ($RUSTC, then beside cargo, then
# PATH) into the cache variables ONNXL_CARGO and ONNXL_RUSTC; fails loudly when missing.
macro(onnxl_find_rust_tools)
  if(NOT ONNXL_CARGO AND DEFINED ENV{CARGO} AND NOT "$ENV{CARGO}" STREQUAL "")
    set(ONNXL_CARGO "$ENV{CARGO}" CACHE FILEPATH "cargo used to build onnx_light")
  endif()
  find_program(ONNXL_CARGO NAMES cargo HINTS "$ENV{HOME}/.cargo/bin" DOC "cargo used to build onnx_light")
  if(NOT ONNXL_CARGO)
    message(FATAL_ERROR "cargo not found: install Rust (https://rustup.rs) or set CARGO / ONNXL_CARGO")
  endif()
  if(NOT ONNXL_RUSTC AND DEFINED ENV{RUSTC} AND NOT "$ENV{RUSTC}" STREQUAL "")
    set(ONNXL_RUSTC "$ENV{RUSTC}" CACHE FILEPATH "rustc (for --print native-static-libs)")
  endif()
  get_filename_component(_onnxl_cargo_dir "${ONNXL_CARGO}" DIRECTORY)
  find_program(ONNXL_RUSTC NAMES rustc HINTS "${_onnxl_cargo_dir}" "$ENV{HOME}/.cargo/bin"
               DOC "rustc (for --print native-static-libs)")
  if(NOT ONNXL_RUSTC)
    message(FATAL_ERROR "rustc not found: install Rust (https://rustup.rs) or set RUSTC / ONNXL_RUSTC")
  endif()
endmacro()

# Sets ${out_var} to the Rust target triple matching a cross-compiling toolchain that has an
# obvious one (MinGW x86-64 / aarch64 / i686: *-pc-windows-gnu[llvm]; Linux aarch64 / x86-64 with
# glibc), or to "" (the host: not cross-compiling, or a toolchain to name with ONNXL_RUST_TARGET).
function(onnxl_default_rust_target out_var)
  set(triple "")
  string(TOLOWER "${CMAKE_SYSTEM_PROCESSOR}" cpu)
  if(cpu MATCHES "^(amd64|x64)$")
    set(cpu x86_64)
  elseif(cpu STREQUAL "arm64")
    set(cpu aarch64)
  endif()
  if(CMAKE_CROSSCOMPILING)
    if(WIN32 AND MINGW AND cpu MATCHES "^(x86_64|i686|aarch64)$")
      if(CMAKE_C_COMPILER_ID STREQUAL "Clang" OR cpu STREQUAL "aarch64")
        set(triple "${cpu}-pc-windows-gnullvm")
      else()
        set(triple "${cpu}-pc-windows-gnu")
      endif()
    elseif(CMAKE_SYSTEM_NAME STREQUAL "Linux" AND cpu MATCHES "^(x86_64|aarch64)$")
      set(triple "${cpu}-unknown-linux-gnu")
    endif()
  endif()
  set(${out_var} "${triple}" PARENT_SCOPE)
endfunction()

# Sets ${out_var} to the native libraries a Rust staticlib links against on target ${triple}
# ("" for the host), as `rustc --print native-static-libs` reports them for an empty staticlib
# crate (e.g. "-lgcc_s;-lutil;-lrt;-lpthread;-lm;-ldl;-lc"), plus what onnx_light's dependencies
# link on their own: nothing on ELF systems, bcrypt on Windows (getrandom's BCryptGenRandom).
function(onnxl_native_static_libs triple out_var)
  set(target_args "")
  if(triple)
    set(target_args --target "${triple}")
  endif()
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/native-static-libs")
  file(MAKE_DIRECTORY "${dir}")
  file(WRITE "${dir}/probe.rs" "// Probe: which native libraries does a Rust staticlib need?\n")
  execute_process(
    COMMAND "${ONNXL_RUSTC}" ${target_args} --crate-type staticlib --crate-name onnxl_probe --edition 2021
            --print native-static-libs -o "${dir}/libonnxl_probe.a" "${dir}/probe.rs"
    WORKING_DIRECTORY "${dir}"
    RESULT_VARIABLE rc
    OUTPUT_VARIABLE out
    ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT "${out}${err}" MATCHES "native-static-libs: ([^\r\n]*)")
    message(FATAL_ERROR "`${ONNXL_RUSTC} --print native-static-libs` failed (${rc}):\n${out}${err}")
  endif()
  string(STRIP "${CMAKE_MATCH_1}" flags)
  separate_arguments(flags UNIX_COMMAND "${flags}")
  if(WIN32)
    list(PREPEND flags -lbcrypt)
  endif()
  set(${out_var} "${flags}" PARENT_SCOPE)
endfunction()
