package toolargs

import (
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type args struct {
	Name  string `json:"name" jsonschema:"who"`
	Count int    `json:"count,omitempty"`
	Extra bool   `json:"extra,omitempty"`
}

func TestDecodeIsStrict(t *testing.T) {
	var a args
	cases := map[string]string{
		`{"name":"x","nmae":1}`:    `unknown field "nmae": the arguments are count, extra, name; nothing was run`,
		`{"name":"x","Ex_tra":1}`:  `unknown field "Ex_tra" (did you mean "extra"?)`,
		`{"name":"x"} {}`:          "more than one JSON value",
		`[1]`:                      "expected a JSON object",
		`{"NAME":"x"}`:             `unknown field "NAME" (did you mean "name"?)`,
		`{"name":"x","name":"y"}`:  `field "name" appears twice`,
		`{"name":5}`:               `"name" must be a string, not number`,
		`{"name":"x","count":1.5}`: `"count" must be a whole number`,
		``:                         "arguments missing",
		`null`:                     "arguments missing",
	}
	for in, want := range cases {
		if err := Decode("tool", []byte(in), &a, false, `{"name":"x"}`); err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "tool: ") {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
	if err := Decode("tool", nil, &a, true, "{}"); err != nil {
		t.Fatal(err)
	}
	if err := Decode("tool", []byte(` {"name":"x","count":2} `), &a, false, ""); err != nil || a.Name != "x" || a.Count != 2 {
		t.Fatalf("%+v %v", a, err)
	}
	// Whole numbers in float form, and arguments wrapped in a JSON string.
	if err := Decode("tool", []byte(`"{\"name\":\"y\",\"count\":1e3}"`), &a, false, ""); err != nil || a.Name != "y" || a.Count != 1000 {
		t.Fatalf("%+v %v", a, err)
	}
}

// Arguments that hosts add to every tool (Gemini CLI's wait_for_previous)
// are taken and ignored, wherever they stand and however the arguments
// came; anything else unknown still fails.
func TestHostArgumentsAreIgnored(t *testing.T) {
	for _, in := range []string{
		`{"name":"x","wait_for_previous":true}`,
		`{"wait_for_previous":false,"name":"x"}`,
		`{"name":"x", "wait_for_previous": null, "count": 2}`,
		`"{\"wait_for_previous\":true,\"name\":\"x\"}"`,
	} {
		var a args
		if err := Decode("tool", []byte(in), &a, false, ""); err != nil || a.Name != "x" {
			t.Errorf("%s: %+v %v", in, a, err)
		}
	}
	var none struct{}
	if err := Decode("tool", []byte(`{"wait_for_previous":true}`), &none, false, ""); err != nil {
		t.Errorf("a tool without arguments: %v", err)
	}
	for in, want := range map[string]string{
		`{"name":"x","wait_for_previous":true,"cwd":"/"}`: `unknown field "cwd"`,
		`{"name":"wait_for_previous","x":1}`:              `unknown field "x"`,
		`{"name":"x","wait_for_previous":true} {}`:        "invalid arguments",
	} {
		var a args
		if err := Decode("tool", []byte(in), &a, false, ""); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
	var a struct{}
	if err := Decode("tool", []byte(`{"x":1}`), &a, true, ""); err == nil || !strings.Contains(err.Error(), "takes no arguments") {
		t.Errorf("no arguments: %v", err)
	}
}

// A tool without arguments still has "properties": {} in its schema.
func TestSchemaOfNoArgumentsHasProperties(t *testing.T) {
	var s map[string]any
	if err := json.Unmarshal(Schema[struct{}](), &s); err != nil {
		t.Fatal(err)
	}
	if p, ok := s["properties"].(map[string]any); !ok || len(p) != 0 || s["type"] != "object" {
		t.Fatalf("%s", Schema[struct{}]())
	}
}

func TestSchemaFromTypeWithOmissions(t *testing.T) {
	var s struct {
		Type       string                    `json:"type"`
		Properties map[string]map[string]any `json:"properties"`
		Required   []string                  `json:"required"`
	}
	if err := json.Unmarshal(Schema[args]("extra"), &s); err != nil {
		t.Fatal(err)
	}
	if s.Type != "object" || s.Properties["name"]["description"] != "who" || s.Properties["extra"] != nil ||
		s.Properties["count"] == nil || len(s.Required) != 1 || s.Required[0] != "name" {
		t.Fatalf("%+v", s)
	}
}

// A host argument written with escapes is still the host's.
func TestEscapedHostArgumentsAreIgnored(t *testing.T) {
	var a args
	if err := Decode("tool", []byte(`{"name":"x","wait_for_\u0070revious":1}`), &a, false, ""); err != nil || a.Name != "x" {
		t.Fatalf("%+v %v", a, err)
	}
}
