#!/usr/bin/env bash
# Makes sure lock-etcd can be built: `protoc` (the etcd-client crate compiles etcd's .proto
# files in its build script), installed from the distribution's `protobuf-compiler` package
# when missing. The one install the build needs; the servers' installs can wait for the tests.
set -euo pipefail

if ! command -v protoc >/dev/null 2>&1; then
    echo "protoc not found; installing the distribution's protobuf-compiler" >&2
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq protobuf-compiler >/dev/null
fi
