# Copied to <build>/tests/unit/agent/tsan-src/CMakeLists.txt (not named CMakeLists.txt here, so
# that tests/CMakeLists.txt does not pick it up as a test folder). Stand-alone ThreadSanitizer build of the agent's lock-free parts (ring, slots, sampler, tracer
# hub). Configured and built by the test_agent_tsan ctest (see ../CMakeLists.txt) in the Release
# pass only, since TSan cannot be combined with the ASan build.
cmake_minimum_required(VERSION 3.20)
project(skyprof_agent_tsan C)
set(CMAKE_C_STANDARD 11)
if(NOT SKP_ROOT)
  message(FATAL_ERROR "pass -DSKP_ROOT=<source dir>")
endif()
set(A ${SKP_ROOT}/src/agent)
set(C ${SKP_ROOT}/src/common)
add_executable(test_agent_tsan ${SKP_ROOT}/tests/unit/agent/tsan/test_agent_tsan.c
  ${A}/ring.c ${A}/task_context.c ${A}/sampler.c ${A}/snapshot.c ${A}/agent_clock.c
  ${A}/agent_thread.c ${A}/tracer.c ${A}/sw8.c
  ${C}/alloc.c ${C}/clock.c ${C}/log.c ${C}/err.c)
target_include_directories(test_agent_tsan PRIVATE ${SKP_ROOT}/src ${SKP_ROOT}/include)
target_compile_definitions(test_agent_tsan PRIVATE _GNU_SOURCE SKP_VERSION="tsan")
target_compile_options(test_agent_tsan PRIVATE -fsanitize=thread -g -O1 -Wall -Wextra -Werror)
target_link_options(test_agent_tsan PRIVATE -fsanitize=thread)
find_package(Threads REQUIRED)
target_link_libraries(test_agent_tsan PRIVATE Threads::Threads)
