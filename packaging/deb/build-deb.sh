#!/usr/bin/env bash
# packaging/deb/build-deb.sh BUILD_DIR OUT_DIR - the skyprof Debian package (`make deb`) from a
# built tree: skyprofd, the skyprof CLI, libskyprof (library and headers), the web UI, the
# systemd unit skyprofd.service with its environment file, and the maintainer scripts that
# create the system user. dpkg-deb only (no debhelper, no network); the dependencies are the
# Debian packages that own the shared libraries the binaries load (ldd + dpkg -S).
# Prints the path of the .deb on stdout.
set -euo pipefail
BUILD=$(cd "$1" && pwd)
OUT=$(mkdir -p "$2" && cd "$2" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)

VERSION=$(sed -n 's/^project(skyprof VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
ARCH=$(dpkg --print-architecture)
STAGE="$OUT/skyprof_${VERSION}_${ARCH}"
rm -rf "$STAGE"
mkdir -p "$STAGE"

# The files, as `make install` lays them out, under /usr.
DESTDIR="$STAGE" cmake --install "$BUILD" --prefix /usr >/dev/null
rm -f "$STAGE/usr/bin/demo_service" # an example, not part of the service
if [ ! -f "$STAGE/usr/share/skyprof/web/index.html" ]; then
  echo "build-deb: $BUILD has no built web UI (web/dist); build it first (node/npm)" >&2
  exit 1
fi
install -D -m 0644 "$HERE/skyprofd.service" "$STAGE/lib/systemd/system/skyprofd.service"
install -D -m 0644 "$HERE/skyprofd.env" "$STAGE/etc/skyprof/skyprofd.env"
install -d "$STAGE/usr/share/doc/skyprof"
for f in README.md docs/deploy.md docs/server.md docs/cli.md docs/api.md; do
  install -m 0644 "$SRC/$f" "$STAGE/usr/share/doc/skyprof/"
done
printf 'skyprof %s\nCopyright: the skyprof developers\nLicense: see the source tree this package was built from\n' \
  "$VERSION" >"$STAGE/usr/share/doc/skyprof/copyright"

# Dependencies: the package of each shared library the ELF files load directly (NEEDED),
# at least the version installed here.
elves=$(find "$STAGE/usr/bin" "$STAGE/usr/lib" -type f -print0 | xargs -0 file -L |
  grep -E 'ELF .* (executable|shared object)' | cut -d: -f1)
deps=$(
  for e in $elves; do
    objdump -p "$e" | awk '$1 == "NEEDED" {print $2}' | while read -r lib; do
      ldd "$e" | awk -v l="$lib" '$1 == l && $3 ~ /^\// {print $3}'
    done
  done | grep -v "^$STAGE" | sort -u | while read -r path; do
    dpkg -S "$path" 2>/dev/null || dpkg -S "$(readlink -f "$path")" 2>/dev/null || true
  done | cut -d: -f1 | sort -u | while read -r pkg; do
    printf '%s (>= %s)\n' "$pkg" "$(dpkg-query -W -f='${Version}' "$pkg")"
  done | paste -sd, | sed 's/,/, /g'
)
SIZE=$(du -sk --exclude=DEBIAN "$STAGE" | cut -f1)

install -d "$STAGE/DEBIAN"
cat >"$STAGE/DEBIAN/control" <<CTRL
Package: skyprof
Version: $VERSION
Architecture: $ARCH
Maintainer: skyprof developers <skyprof@localhost>
Section: devel
Priority: optional
Installed-Size: $SIZE
Depends: adduser, $deps
Description: on-demand, trace-aware profiling, wire-compatible with Apache SkyWalking
 skyprofd is a profiling backend: a gRPC collector that SkyWalking's v3 agents talk to,
 profile-task lifecycle, analysis into stack trees, an HTTP/JSON API and a web UI, on an
 embedded SQLite database or PostgreSQL. The package also holds the skyprof command-line
 client, libskyprof (the C agent: library and headers) and the skyprofd.service unit.
CTRL
echo "/etc/skyprof/skyprofd.env" >"$STAGE/DEBIAN/conffiles"
for s in postinst prerm postrm; do install -m 0755 "$HERE/$s" "$STAGE/DEBIAN/$s"; done

DEB="$OUT/skyprof_${VERSION}_${ARCH}.deb"
dpkg-deb --root-owner-group --build "$STAGE" "$DEB" >/dev/null
rm -rf "$STAGE"
echo "$DEB"
