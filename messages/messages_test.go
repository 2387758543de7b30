package messages

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

func TestMain(m *testing.M) {
	testkit.Main(m)
}

// The messages cross machine boundaries as protobuf: a round trip keeps
// every field.
func TestRoundTrip(t *testing.T) {
	in := &ToolResult{CallId: "c1", Tool: "bash", Text: "héllo\n", IsError: true, Data: []byte(`{"exit_code":1}`)}
	b, err := proto.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out ToolResult
	if err := proto.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(in, &out) {
		t.Fatalf("got %v, want %v", &out, in)
	}
	call := &ToolCall{CallId: "c2", AgentId: "a", Tool: "bash", Arguments: []byte(`{"command":"ls"}`)}
	b, err = proto.Marshal(call)
	if err != nil {
		t.Fatal(err)
	}
	var back ToolCall
	if err := proto.Unmarshal(b, &back); err != nil || !proto.Equal(call, &back) {
		t.Fatalf("%v %v", &back, err)
	}
}
