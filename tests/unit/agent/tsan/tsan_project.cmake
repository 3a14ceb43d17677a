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
# src/common is small and every agent part may use any of it: all of its files.
file(GLOB common_src ${C}/*.c)
add_executable(test_agent_tsan ${SKP_ROOT}/tests/unit/agent/tsan/test_agent_tsan.c
  ${A}/ring.c ${A}/task_context.c ${A}/sampler.c ${A}/snapshot.c ${A}/agent_clock.c
  ${A}/agent_thread.c ${A}/tracer.c ${A}/sw8.c ${A}/cont_http.c
  ${common_src})
target_include_directories(test_agent_tsan PRIVATE ${SKP_ROOT}/src ${SKP_ROOT}/include)
target_compile_definitions(test_agent_tsan PRIVATE _GNU_SOURCE SKP_VERSION="tsan")
target_compile_options(test_agent_tsan PRIVATE -fsanitize=thread -g -O1 -Wall -Wextra -Werror)
target_link_options(test_agent_tsan PRIVATE -fsanitize=thread)
find_package(Threads REQUIRED)
target_link_libraries(test_agent_tsan PRIVATE Threads::Threads)

# The agent unit tests that use threads (slots + sampler, the channel with the real start/stop
# path) under TSan too. They need the generated protobuf-c code of the main build (SKP_GEN_DIR)
# and the wire client.
if(SKP_GEN_DIR AND EXISTS ${SKP_GEN_DIR}/profile/Profile.pb-c.c)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(PROTOBUFC REQUIRED IMPORTED_TARGET libprotobuf-c)
  pkg_check_modules(NGHTTP2 REQUIRED IMPORTED_TARGET libnghttp2)
  pkg_check_modules(CMOCKA REQUIRED IMPORTED_TARGET cmocka)
  pkg_check_modules(ZLIB REQUIRED IMPORTED_TARGET zlib)
  file(STRINGS ${A}/core_sources.txt agent_names REGEX "^[^#]")
  set(agent_src ${A}/no_default_source.c)
  foreach(f ${agent_names})
    list(APPEND agent_src ${A}/${f})
  endforeach()
  file(GLOB_RECURSE gen_src ${SKP_GEN_DIR}/*.pb-c.c)
  add_library(agent_tsan STATIC ${agent_src} ${gen_src} ${SKP_ROOT}/src/wire/grpc_client.c
              ${SKP_ROOT}/src/wire/grpc_frame.c ${SKP_ROOT}/src/wire/pprof_encode.c ${common_src})
  target_include_directories(agent_tsan PUBLIC ${SKP_ROOT}/src ${SKP_ROOT}/include ${SKP_GEN_DIR})
  target_compile_definitions(agent_tsan PUBLIC _GNU_SOURCE SKP_VERSION="tsan")
  target_compile_options(agent_tsan PUBLIC -fsanitize=thread -g -O1)
  target_link_libraries(agent_tsan PUBLIC PkgConfig::PROTOBUFC PkgConfig::NGHTTP2 PkgConfig::ZLIB Threads::Threads)
  foreach(t test_task_context test_channel)
    add_executable(${t}_tsan ${SKP_ROOT}/tests/unit/agent/${t}.c
                   ${SKP_ROOT}/tests/unit/agent/fakes.c)
    target_include_directories(${t}_tsan PRIVATE ${SKP_ROOT}/tests)
    target_link_libraries(${t}_tsan PRIVATE agent_tsan PkgConfig::CMOCKA)
    target_link_options(${t}_tsan PRIVATE -fsanitize=thread)
  endforeach()
endif()
