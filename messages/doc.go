// Package messages holds the protocol that crosses the agent boundary: tool
// calls, tool results and cancellations, and the events of an agent's
// session log (Event: user and model messages, tool calls and results,
// injected context, compactions), as protobuf messages (see
// messages.proto) so that protoactor's remote layer can carry them and the
// session log can store them.
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
