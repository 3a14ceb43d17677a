# Helpers for tests. Every test is registered with ctest; `make test` runs them in a Release
# build and again in a Debug build with ASan+UBSan (SKP_SANITIZE=ON).

# skp_add_cmocka_test(NAME SOURCES a.c b.c LIBS lib1 lib2 [LABELS l] [TIMEOUT s])
function(skp_add_cmocka_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include
                             ${CMAKE_SOURCE_DIR}/tests)
  target_link_libraries(${name} PRIVATE ${T_LIBS} PkgConfig::CMOCKA)
  add_test(NAME ${name} COMMAND ${name})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "unit;${T_LABELS}")
endfunction()

# skp_add_py_test(NAME SCRIPT path [ARGS ...] [DEPENDS targets] [ENV K=V ...] [TIMEOUT s])
# Runs `script` with the system interpreter (Debian grpcio/protobuf), the generated stubs on
# PYTHONPATH and SKP_BUILD_DIR / SKP_SOURCE_DIR in the environment.
function(skp_add_py_test name)
  cmake_parse_arguments(T "" "SCRIPT;TIMEOUT;PYTHON" "ARGS;ENV;LABELS" ${ARGN})
  if(NOT T_PYTHON)
    set(T_PYTHON ${SKP_SYSTEM_PYTHON})
  endif()
  add_test(NAME ${name} COMMAND ${T_PYTHON} ${T_SCRIPT} ${T_ARGS})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set(env "PYTHONPATH=${SKP_PYSTUBS_DIR}:${CMAKE_SOURCE_DIR}/tests/harness"
          "SKP_BUILD_DIR=${CMAKE_BINARY_DIR}" "SKP_SOURCE_DIR=${CMAKE_SOURCE_DIR}"
          "SKP_SANITIZE=$<BOOL:${SKP_SANITIZE}>" "PYTHONDONTWRITEBYTECODE=1" ${T_ENV})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} ENVIRONMENT "${env}"
                       LABELS "integration;${T_LABELS}")
endfunction()

# A real PostgreSQL server for the tests (tests/harness/pgserver.py): ctest's fixture `postgres`
# starts one per build directory (pg_server_start) before the first test that needs it and stops
# it (pg_server_stop) after the last, also when tests fail. Its directory is under /tmp, named
# after the build directory, because a unix socket path is limited to 107 bytes and the server's
# unprivileged user (CI runs as root) must reach it. Tests find it through SKP_PG_DIR (Python:
# pgserver.test_url(name) gives a fresh database on it) and SKP_PG_URL (its `skyprof` database).
string(MD5 _skp_pg_hash "${CMAKE_BINARY_DIR}")
string(SUBSTRING "${_skp_pg_hash}" 0 10 _skp_pg_hash)
set(SKP_PG_DIR "/tmp/skp-pg-${_skp_pg_hash}" CACHE INTERNAL "the tests' PostgreSQL directory")
set(SKP_PG_URL "postgresql://skyprof@/skyprof?host=${SKP_PG_DIR}&port=5432"
    CACHE INTERNAL "the tests' PostgreSQL URL")

# skp_test_uses_postgres(test1 test2 ...): the tests run with the fixture's server up.
function(skp_test_uses_postgres)
  foreach(t ${ARGN})
    set_property(TEST ${t} APPEND PROPERTY FIXTURES_REQUIRED postgres)
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT "SKP_PG_DIR=${SKP_PG_DIR}"
                 "SKP_PG_URL=${SKP_PG_URL}")
    set_property(TEST ${t} APPEND PROPERTY LABELS postgres)
  endforeach()
endfunction()
