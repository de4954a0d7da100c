#!/usr/bin/env bash
# make preview: publish a sample vector into a CTF
# directory and into a registry served on loopback, and show what fluxdeployer makes of it.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bin=bin/fluxdeployer
work=$(mktemp -d)
trap 'kill "${registry_pid:-}" 2>/dev/null || true; rm -rf "$work"' EXIT
go build -o "$work/demo" ./hack/demo

echo "== the ArtifactDeployment name of one artifact"
"$bin" name --component acme.org/artifacts/frontend --version 1.2.3+build.5 -o json

echo "== the sample vector, from a CTF directory"
ref=$("$work/demo" -ctf "$work/ctf")
"$bin" vector inspect "$ref" --uid 3f0c1b2a-0000-4000-8000-000000000001

echo "== the same vector, from an OCI registry on loopback"
"$work/demo" -serve 127.0.0.1:0 >"$work/registry.out" &
registry_pid=$!
for _ in $(seq 100); do [ -s "$work/registry.out" ] && break; sleep 0.1; done
"$bin" vector inspect "$(cat "$work/registry.out")" --uid 3f0c1b2a-0000-4000-8000-000000000001 -o json
