#!/usr/bin/env bash
# Formatting that stays fixed: every tracked C++ file as clang-format-14
# formats it (the repository's .clang-format), every BUILD, .bzl and
# WORKSPACE file as buildifier formats it, every Go file as gofmt does.
#   tools/lint.sh          # check: lists what is unformatted, exits 1 if any
#   tools/lint.sh --fix    # rewrites those files in place
# buildifier is built once from the pinned module in tools/buildifier/
# (through the Go module proxy) into a cache directory outside the tree,
# keyed by that module's go.sum, so later runs take no time.
set -euo pipefail
cd "$(dirname "$0")/.."

fix=0
case "${1:-}" in
  --fix) fix=1 ;;
  "") ;;
  *) echo "usage: tools/lint.sh [--fix]" >&2; exit 2 ;;
esac

die() { echo "lint: $*" >&2; exit 2; }

command -v clang-format-14 >/dev/null ||
  die "clang-format-14 is missing (tools/install_deps.sh installs it)"
command -v go >/dev/null ||
  die "go is missing: buildifier and gofmt come from the Go toolchain"

# The pinned buildifier, built on first use.
buildifier_bin() {
  local key dir
  key="$(cat tools/buildifier/go.mod tools/buildifier/go.sum | sha256sum | cut -c1-16)"
  dir="${XDG_CACHE_HOME:-$HOME/.cache}/informer-sidecar/buildifier-$key"
  if [ ! -x "$dir/buildifier" ]; then
    echo "lint: building the pinned buildifier into $dir" >&2
    mkdir -p "$dir"
    (cd tools/buildifier &&
      go build -trimpath -o "$dir/buildifier.tmp" \
        github.com/bazelbuild/buildtools/buildifier) ||
      die "building buildifier failed (is the Go module proxy reachable?)"
    mv "$dir/buildifier.tmp" "$dir/buildifier"
  fi
  echo "$dir/buildifier"
}
buildifier="$(buildifier_bin)"

mapfile -t cc_files < <(git ls-files -- '*.cc' '*.h')
mapfile -t bazel_files < <(git ls-files -- '*BUILD.bazel' '*BUILD' '*.bzl' \
  'WORKSPACE' '*.BUILD')
mapfile -t go_files < <(git ls-files -- '*.go')

if [ "$fix" -eq 1 ]; then
  clang-format-14 -i "${cc_files[@]}"
  "$buildifier" -lint=off "${bazel_files[@]}"
  [ ${#go_files[@]} -eq 0 ] || gofmt -w "${go_files[@]}"
  echo "lint: formatted ${#cc_files[@]} C++, ${#bazel_files[@]} Bazel and ${#go_files[@]} Go files"
  exit 0
fi

bad=()
for f in "${cc_files[@]}"; do
  clang-format-14 --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
while IFS= read -r f; do
  [ -n "$f" ] && bad+=("$f")
done < <("$buildifier" -mode=check -lint=off "${bazel_files[@]}" 2>&1 |
  sed -n 's/^\(.*\) # reformat$/\1/p')
if [ ${#go_files[@]} -gt 0 ]; then
  while IFS= read -r f; do
    [ -n "$f" ] && bad+=("$f")
  done < <(gofmt -l "${go_files[@]}")
fi

if [ ${#bad[@]} -gt 0 ]; then
  printf 'lint: not formatted: %s\n' "${bad[@]}" >&2
  echo "lint: ${#bad[@]} file(s) not formatted; fix them with: tools/lint.sh --fix" >&2
  exit 1
fi
echo "lint: ${#cc_files[@]} C++, ${#bazel_files[@]} Bazel and ${#go_files[@]} Go files formatted"
