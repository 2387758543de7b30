// Package messages holds the protocol that crosses the agent boundary: tool
// calls, tool results and cancellations, as protobuf messages (see
// messages.proto) so that protoactor's remote layer can carry them.
//
// Messages private to one actor stay in that actor's package.
//
// The generated messages.pb.go is committed; regenerate it with
//
//	go generate ./messages
//
// which needs protoc (apt-get install -y protobuf-compiler).
package messages

//go:generate ./generate.sh
