#!/usr/bin/env bash
# Downloads Debian packages from the unstable suite and extracts them (without installing)
# into third_party/debian/<package>/, for bindgen and compile checks against real headers.
#
#   third_party/fetch-debian-headers.sh libhsa-runtime-dev libxrt-dev ...
#
# Uses a private sources list, lists folder and cache, so the system's apt setup is untouched.
# The libraries inside need a newer glibc than Debian 12 has: use the headers only.
# Versions are pinned in third_party/versions.txt (a version prefix): another version is refused.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work="$here/debian/.apt"
mkdir -p "$work/lists/partial" "$work/archives/partial" "$work/etc"
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
cat >"$work/etc/sources.list" <<SRC
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror unstable main
SRC
apt_opts=(
  -o "Dir::Etc::sourcelist=$work/etc/sources.list"
  -o "Dir::Etc::sourceparts=-"
  -o "Dir::State::Lists=$work/lists"
  -o "Dir::Cache::Archives=$work/archives"
  -o "Dir::Cache::pkgcache="
  -o "Dir::Cache::srcpkgcache="
  -o "APT::Get::List-Cleanup=0"
  -o "APT::Sandbox::User=root"
)
stamp="$work/lists/.updated"
if [ ! -f "$stamp" ] || [ -n "$(find "$stamp" -mmin +1440 2>/dev/null)" ]; then
  apt-get "${apt_opts[@]}" update -qq
  touch "$stamp"
fi
for pkg in "$@"; do
  want=$(awk -v p="$pkg" '$1 == p { print $2 }' "$here/versions.txt")
  dest="$here/debian/$pkg"
  if [ -f "$dest/.version" ] && [ -n "$want" ]; then
    case "$(cut -d: -f2- "$dest/.version")" in "$want"*) continue ;; esac
  fi
  have=$(apt-cache "${apt_opts[@]}" show "$pkg" 2>/dev/null | awk '/^Version:/ { print $2; exit }')
  if [ -z "$have" ]; then
    echo "fetch-debian-headers: $pkg is not in Debian unstable (looked at $mirror)" >&2
    exit 1
  fi
  bare=${have#*:} # without the epoch
  if [ -n "$want" ] && [ "${bare#"$want"}" = "$bare" ]; then
    echo "fetch-debian-headers: $pkg is at $have in unstable, third_party/versions.txt pins $want" >&2
    echo "  update the pin after checking the new headers still build" >&2
    exit 1
  fi
  (cd "$work/archives" && apt-get "${apt_opts[@]}" download -qq "$pkg")
  deb=$(ls -t "$work/archives/${pkg}_"*.deb | head -n 1)
  rm -rf "$dest"
  mkdir -p "$dest"
  dpkg -x "$deb" "$dest"
  echo "$have" >"$dest/.version"
  echo "fetched $pkg $have into $dest"
done
