# The instruction set remat is compiled for, and the guard against a
# compiler that generates wrong code for it. Included by CMakeLists.txt;
# sets REMAT_ARCH_FLAGS (added to every target) and prints its decision.
#
# - Default: -march=x86-64-v3 -mtune=generic (AVX2, FMA, BMI2), so a binary
#   built on one machine runs on any other x86-64-v3 machine. GEMM, where the
#   time goes, is BLIS's, whose kernels are chosen at run time by the CPU's
#   features (kernels/cpu/gemm_library.h); remat's elementwise kernels are
#   memory-bound.
#   A build machine without AVX2 gets x86-64-v2.
# - REMAT_NATIVE=ON: -march=native; REMAT_ARCH=<cpu>: -march=<cpu> (say
#   x86-64-v4 or znver3), for a binary that runs only on such CPUs.
# - The probe: cmake/probes/vector_init.cpp is built with these flags and run.
#   Where it prints a wrong vector (g++ 12.2 with AVX-512: issue 16) AVX-512 is
#   turned off (-mno-avx512f). Where the build machine cannot run the chosen
#   instructions, GCC builds with AVX-512 are not trusted and turned off too.
include(CheckCXXSourceCompiles)

option(REMAT_NATIVE "Compile for the build machine's CPU (-march=native) instead of x86-64-v3" OFF)
set(REMAT_ARCH "" CACHE STRING "Compile for this -march (e.g. x86-64-v4); empty: x86-64-v3, or native with REMAT_NATIVE")

set(_probe_source ${CMAKE_CURRENT_LIST_DIR}/probes/vector_init.cpp)
set(_probe_expected "0.5 0.5 0 0")

# _remat_probe(<flags> <result var>): "right", "wrong: <output>" or
# "cannot run: <why>", at -O2 (where the reproduction was found) and -O3
# (the Release build's level).
function(_remat_probe flags result)
  foreach(level -O2 -O3)
    string(MAKE_C_IDENTIFIER "${flags}${level}" tag)
    try_run(run_code compiled ${PROJECT_BINARY_DIR}/arch_probe/${tag} ${_probe_source}
            COMPILE_DEFINITIONS ${level} ${flags}
            COMPILE_OUTPUT_VARIABLE compile_output RUN_OUTPUT_VARIABLE run_output)
    string(STRIP "${run_output}" run_output)
    if(NOT compiled)
      set(${result} "cannot run: the compiler rejects ${flags}" PARENT_SCOPE)
      return()
    elseif(NOT "${run_code}" STREQUAL "0")
      set(${result} "cannot run: the probe exited with '${run_code}' (instructions this CPU lacks?)" PARENT_SCOPE)
      return()
    elseif(NOT run_output STREQUAL _probe_expected)
      set(${result} "wrong: printed '${run_output}' at ${level} instead of '${_probe_expected}'" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${result} "right" PARENT_SCOPE)
endfunction()

# Whether <flags> enable AVX-512 (the compiler's own predefined macro).
function(_remat_enables_avx512 flags result)
  set(CMAKE_REQUIRED_FLAGS "${flags}")
  set(CMAKE_REQUIRED_QUIET ON)
  string(MAKE_C_IDENTIFIER "REMAT_AVX512_${flags}" var)
  check_cxx_source_compiles("#ifndef __AVX512F__\n#error no AVX-512\n#endif\nint main() {}" ${var})
  set(${result} ${${var}} PARENT_SCOPE)
endfunction()

if(NOT CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  set(REMAT_ARCH_FLAGS "")
  message(STATUS "remat: ${CMAKE_SYSTEM_PROCESSOR}: the compiler's default instruction set")
  return()
endif()

if(REMAT_ARCH)
  set(_wanted "-march=${REMAT_ARCH}")
elseif(REMAT_NATIVE)
  set(_wanted "-march=native")
else()
  set(_wanted "-march=x86-64-v3" "-mtune=generic")
endif()
string(JOIN " " _wanted_text ${_wanted})

_remat_probe("${_wanted}" _verdict)
if(_verdict MATCHES "^cannot run" AND NOT REMAT_ARCH AND NOT REMAT_NATIVE)
  # The portable default on a machine without AVX2: one level down.
  message(STATUS "remat: ${_wanted_text}: ${_verdict}; using x86-64-v2")
  set(_wanted "-march=x86-64-v2" "-mtune=generic")
  string(JOIN " " _wanted_text ${_wanted})
  _remat_probe("${_wanted}" _verdict)
endif()

set(REMAT_ARCH_FLAGS ${_wanted})
_remat_enables_avx512("${_wanted_text}" _avx512)
if(_verdict MATCHES "^wrong")
  if(_avx512)
    list(APPEND REMAT_ARCH_FLAGS -mno-avx512f)
    _remat_probe("${REMAT_ARCH_FLAGS}" _guarded)
    message(STATUS "remat: ${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION} generates wrong code with ${_wanted_text} "
                   "(probe ${_verdict}); AVX-512 turned off: -mno-avx512f (probe now: ${_guarded})")
    if(NOT _guarded STREQUAL "right")
      message(FATAL_ERROR "remat: the compiler still generates wrong code with ${REMAT_ARCH_FLAGS}; use clang or another -march")
    endif()
  else()
    message(FATAL_ERROR "remat: ${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION} generates wrong code with "
                        "${_wanted_text} (probe ${_verdict}); use clang or another -march")
  endif()
elseif(_verdict MATCHES "^cannot run" AND _avx512 AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  list(APPEND REMAT_ARCH_FLAGS -mno-avx512f)
  message(WARNING "remat: ${_wanted_text}: ${_verdict}; g++ 12.2 is known to generate wrong AVX-512 code and this "
                  "cannot be checked here, so AVX-512 is turned off: -mno-avx512f. Build on an AVX-512 machine, "
                  "or with clang, to keep it.")
else()
  if(_avx512)
    set(_avx512_text "AVX-512 on")
  else()
    set(_avx512_text "no AVX-512")
  endif()
  message(STATUS "remat: compiling for ${_wanted_text} (probe: ${_verdict}; ${_avx512_text})")
endif()
string(JOIN " " REMAT_ARCH_TEXT ${REMAT_ARCH_FLAGS})
