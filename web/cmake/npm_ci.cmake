# npm_ci.cmake - runs `npm ci` in web/ only when node_modules is missing or package-lock.json
# changed since the last install (its SHA-256 is kept in node_modules/.skyprof-lock.sha256), so
# an offline rebuild with node_modules present never touches the network. A file lock keeps two
# build trees (release, asan) from installing at the same time.
# Inputs: -DWEB_DIR=... -DNPM=... -DSTAMP=...
file(SHA256 ${WEB_DIR}/package-lock.json lock_hash)
set(marker ${WEB_DIR}/node_modules/.skyprof-lock.sha256)
file(LOCK ${WEB_DIR}/.npm-ci.lock GUARD PROCESS TIMEOUT 900)
set(have "")
if(EXISTS ${marker})
  file(READ ${marker} have)
  string(STRIP "${have}" have)
endif()
if(EXISTS ${WEB_DIR}/node_modules AND have STREQUAL lock_hash)
  message(STATUS "web: node_modules matches package-lock.json")
else()
  message(STATUS "web: npm ci")
  execute_process(COMMAND ${NPM} ci --no-audit --no-fund --loglevel=error
                  WORKING_DIRECTORY ${WEB_DIR} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    if(EXISTS ${WEB_DIR}/node_modules/vite)
      message(WARNING "web: npm ci failed (offline?); building with the node_modules present")
    else()
      message(FATAL_ERROR "web: npm ci failed and web/node_modules is missing")
    endif()
  else()
    file(WRITE ${marker} "${lock_hash}\n")
  endif()
endif()
file(TOUCH ${STAMP})
