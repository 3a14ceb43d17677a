# SkpFuzz.cmake - one way to declare a fuzz target (tests/fuzz/<dir>/CMakeLists.txt):
#
#   skp_fuzz_target(<name> SOURCES <driver.c...> LIBS <targets...> CORPUS <dir>
#                   [ARGS <libFuzzer flags...>])
#
# The driver defines LLVMFuzzerTestOneInput. What the call builds depends on the build tree:
#   release / asan (gcc): fuzz_replay_<name> = the driver + tests/fuzz/replay.c, and the ctest
#       test fuzz_replay_<name> that feeds it every file of CORPUS (and their prefixes): cheap,
#       so every build checks the seeds and the regression inputs (under ASan in build/asan).
#   fuzz (clang, SKP_FUZZ=ON, `make fuzz` / `make test` configure it as build/fuzz): the libFuzzer
#       binary fuzz_<name> (ASan + UBSan + libFuzzer coverage over every library it links) and
#       the ctest test fuzz_<name>, a mutation run of $SKP_FUZZ_SECONDS (default 15) seconds
#       through tests/fuzz/run.sh, starting from CORPUS; new inputs go to the build tree.
# Every target's name, corpus and flags are also written to <build>/fuzz_targets.txt.
set(SKP_FUZZ_RUN ${CMAKE_SOURCE_DIR}/tests/fuzz/run.sh)
set(SKP_FUZZ_REPLAY ${CMAKE_SOURCE_DIR}/tests/fuzz/replay.c)
file(WRITE ${CMAKE_BINARY_DIR}/fuzz_targets.txt "")

function(skp_fuzz_target name)
  cmake_parse_arguments(F "" "CORPUS" "SOURCES;LIBS;ARGS" ${ARGN})
  if(NOT F_SOURCES OR NOT F_CORPUS)
    message(FATAL_ERROR "skp_fuzz_target(${name}): SOURCES and CORPUS are required")
  endif()
  get_filename_component(corpus ${F_CORPUS} ABSOLUTE)
  string(JOIN " " args ${F_ARGS})
  file(APPEND ${CMAKE_BINARY_DIR}/fuzz_targets.txt "${name} ${corpus} ${args}\n")
  if(SKP_FUZZ)
    add_executable(fuzz_${name} ${F_SOURCES})
    target_link_libraries(fuzz_${name} PRIVATE ${F_LIBS})
    target_link_options(fuzz_${name} PRIVATE -fsanitize=fuzzer)
    add_test(NAME fuzz_${name}
             COMMAND sh ${SKP_FUZZ_RUN} $<TARGET_FILE:fuzz_${name}> ${corpus} ${F_ARGS}
             WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
    set_tests_properties(fuzz_${name} PROPERTIES LABELS "fuzz;fuzzrun")
  else()
    add_executable(fuzz_replay_${name} ${F_SOURCES} ${SKP_FUZZ_REPLAY})
    target_link_libraries(fuzz_replay_${name} PRIVATE ${F_LIBS})
    add_test(NAME fuzz_replay_${name} COMMAND fuzz_replay_${name} ${corpus})
    set_tests_properties(fuzz_replay_${name} PROPERTIES LABELS "fuzz" TIMEOUT 300)
  endif()
endfunction()
