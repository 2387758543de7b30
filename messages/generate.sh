#!/usr/bin/env bash
# Regenerates messages.pb.go from messages.proto. Needs protoc
# (apt-get install -y protobuf-compiler); protoc-gen-go is built from the
# version of google.golang.org/protobuf that go.mod pins.
set -euo pipefail
cd "$(dirname "$0")"
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go
protoc --plugin=protoc-gen-go="$bin/protoc-gen-go" --go_out=. --go_opt=paths=source_relative messages.proto
