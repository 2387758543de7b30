package toolargs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/big"
	"reflect"
	"slices"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/google/jsonschema-go/jsonschema"
)

// Decode decodes raw into v (a pointer to a struct). Empty or null
// arguments decode as {} when allowEmpty is true, and are an error otherwise;
// example is shown in that error. Arguments sent as a JSON string that holds
// the object (the way some model APIs carry them) are unwrapped. Field names
// must match exactly and once; integral numbers written as 1500.0 or 1e3 are
// taken for integer fields.
func Decode(tool string, raw []byte, v any, allowEmpty bool, example string) error {
	trimmed := withoutHostArguments(unwrap(raw))
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		if allowEmpty {
			return nil
		}
		return fmt.Errorf("%s: arguments missing: expected a JSON object like %s", tool, example)
	}
	if trimmed[0] != '{' {
		return fmt.Errorf("%s: invalid arguments: expected a JSON object like %s", tool, example)
	}
	// The strict rules above are encoding/json/v2's defaults (exact names,
	// no duplicates) plus RejectUnknownMembers: well-formed arguments decode
	// in one pass. Anything it refuses goes the slow way below, which also
	// accepts 1500.0 for an integer and explains what is wrong.
	if jsonv2.Unmarshal(trimmed, v, jsonv2.RejectUnknownMembers(true)) == nil {
		return nil
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv.Elem().SetZero() // drop what the failed pass filled in
	}
	if err := checkKeys(trimmed, v); err != nil {
		return fmt.Errorf("%s: invalid arguments: %w", tool, err)
	}
	err := decodeStrict(trimmed, v)
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		if fixed, ok := integralNumbers(trimmed); ok && decodeStrict(fixed, v) == nil {
			return nil
		}
		if n, ok := wholeNumber(trimmed, typeErr.Field); ok && isInteger(typeErr.Type) {
			return fmt.Errorf("%s: invalid arguments: %q is %s, which is out of range for it (at most %s)", tool, typeErr.Field, n, maxOf(typeErr.Type))
		}
		return fmt.Errorf("%s: invalid arguments: %q must be %s, not %s", tool, typeErr.Field, kindOf(typeErr.Type), typeErr.Value)
	}
	if err != nil {
		return fmt.Errorf("%s: invalid arguments: %w", tool, err)
	}
	return nil
}

// unwrap returns the arguments as Decode reads them: trimmed, and taken out
// of the JSON string that holds them, if they came in one.
func unwrap(raw []byte) []byte {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) > 0 && trimmed[0] == '"' {
		var inner string
		if json.Unmarshal(trimmed, &inner) == nil {
			trimmed = bytes.TrimSpace([]byte(inner))
		}
	}
	return trimmed
}

func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

// checkKeys refuses keys that are not v's JSON field names exactly
// (encoding/json would match them ignoring case) or that come twice.
func checkKeys(b []byte, v any) error {
	names := fieldNames(reflect.TypeOf(v))
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil { // {
		return err
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		if _, ok := names[key]; !ok {
			return unknownField(key, names)
		}
		if seen[key] {
			return fmt.Errorf("field %q appears twice", key)
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	return nil
}

// unknownField is the error for a key that is not one of names: it lists
// the names, and points at the one meant when key differs from it only in
// case and underscores (timeoutMs for timeout_ms). Nothing of the call runs:
// an argument ignored could change what a command does (a cwd that bash
// does not take, a misspelled timeout).
func unknownField(key string, names map[string]struct{}) error {
	known := slices.Sorted(maps.Keys(names))
	fold := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "")) }
	for _, n := range known {
		if fold(n) == fold(key) {
			return fmt.Errorf("unknown field %q (did you mean %q?); nothing was run", key, n)
		}
	}
	if len(known) == 0 {
		return fmt.Errorf("unknown field %q: this tool takes no arguments; nothing was run", key)
	}
	return fmt.Errorf("unknown field %q: the arguments are %s; nothing was run", key, strings.Join(known, ", "))
}

// HostArguments are arguments that MCP hosts add to every tool's schema
// for their own use and forward in calls: Gemini CLI's wait_for_previous
// (a scheduling hint it acts on itself). Every tool accepts and ignores
// them, where any other unknown argument fails the call.
var HostArguments = []string{"wait_for_previous"}

// withoutHostArguments returns the object b without the HostArguments
// keys; b itself when it has none (the common case costs one scan).
func withoutHostArguments(b []byte) []byte {
	// A key may be written with escapes ("wait_for_\u0070revious"): any
	// escape makes the object worth decoding.
	found := bytes.Contains(b, []byte(`\u`))
	for _, name := range HostArguments {
		if bytes.Contains(b, []byte(name)) {
			found = true
		}
	}
	if !found || len(b) == 0 || b[0] != '{' {
		return b
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil {
		return b
	}
	var out bytes.Buffer
	out.WriteByte('{')
	first := true
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return b // malformed: Decode reports it on the original
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return b
		}
		if slices.Contains(HostArguments, key) {
			continue
		}
		if !first {
			out.WriteByte(',')
		}
		first = false
		k, _ := json.Marshal(key)
		out.Write(k)
		out.WriteByte(':')
		out.Write(v)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return b
	}
	if _, err := dec.Token(); err != io.EOF {
		return b // a second value: Decode reports it on the original
	}
	out.WriteByte('}')
	return out.Bytes()
}

// fieldNames are the JSON names of a struct type's fields.
func fieldNames(t reflect.Type) map[string]struct{} {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	names := map[string]struct{}{}
	if t.Kind() != reflect.Struct {
		return names
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names[name] = struct{}{}
	}
	return names
}

// integralNumbers rewrites numbers such as 1500.0 or 1e3 that are whole as
// plain integers; ok is false when there was nothing to rewrite.
func integralNumbers(b []byte) ([]byte, bool) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if dec.Decode(&m) != nil {
		return nil, false
	}
	changed := false
	for k, v := range m {
		n, ok := v.(json.Number)
		if !ok || !strings.ContainsAny(string(n), ".eE") {
			continue
		}
		f, _, err := big.ParseFloat(string(n), 10, 256, big.ToNearestEven)
		if err != nil || !f.IsInt() {
			continue
		}
		i, _ := f.Int(nil)
		m[k] = json.Number(i.String())
		changed = true
	}
	if !changed {
		return nil, false
	}
	out, err := json.Marshal(m)
	return out, err == nil
}

// Has reports whether the arguments raw (as Decode takes them) hold key
// with a value other than null.
func Has(raw []byte, key string) bool {
	trimmed := unwrap(raw)
	var m map[string]json.RawMessage
	if json.Unmarshal(trimmed, &m) != nil {
		return false
	}
	v, ok := m[key]
	return ok && string(bytes.TrimSpace(v)) != "null"
}

// wholeNumber returns field's value in the object b when it is a whole
// number, however it is written (1e30, 5.0, 12).
func wholeNumber(b []byte, field string) (string, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return "", false
	}
	raw, ok := m[field]
	if !ok {
		return "", false
	}
	f, _, err := big.ParseFloat(strings.TrimSpace(string(raw)), 10, 256, big.ToNearestEven)
	if err != nil || !f.IsInt() {
		return "", false
	}
	return strings.TrimSpace(string(raw)), true
}

func isInteger(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// maxOf is the largest value of an integer type.
func maxOf(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	bits := t.Bits()
	switch t.Kind() {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(bits)), big.NewInt(1)).String()
	}
	return new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(bits-1)), big.NewInt(1)).String()
}

// kindOf names a Go type the way a JSON user thinks of it.
func kindOf(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return kindOf(t.Elem())
	}
	return t.String()
}

// Schema returns the JSON Schema of T's JSON form (generated from the Go
// type and its `jsonschema` tags), without the properties named in omit.
func Schema[T any](omit ...string) json.RawMessage {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		// The argument types are this project's own: a failure is a bug.
		panic(fmt.Sprintf("toolargs: schema of %T: %v", *new(T), err))
	}
	plainTypes(s)
	for _, name := range omit {
		delete(s.Properties, name)
		s.Required = slices.DeleteFunc(s.Required, func(r string) bool { return r == name })
		s.PropertyOrder = slices.DeleteFunc(s.PropertyOrder, func(r string) bool { return r == name })
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("toolargs: schema of %T: %v", *new(T), err))
	}
	if len(s.Properties) == 0 {
		// An object with no properties still says so ("properties": {}):
		// some hosts and model APIs refuse an object schema without it
		// (Codex and opencode add it themselves).
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			panic(fmt.Sprintf("toolargs: schema of %T: %v", *new(T), err))
		}
		m["properties"] = map[string]any{}
		if b, err = json.Marshal(m); err != nil {
			panic(fmt.Sprintf("toolargs: schema of %T: %v", *new(T), err))
		}
	}
	return b
}

// plainTypes turns the type unions an optional (pointer) field gets,
// ["null","integer"], into the plain type: a field that may be left out is
// optional by not being required, and some model APIs refuse unions.
func plainTypes(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if len(s.Types) > 0 {
		others := slices.DeleteFunc(slices.Clone(s.Types), func(t string) bool { return t == "null" })
		if len(others) == 1 {
			s.Type, s.Types = others[0], nil
		}
	}
	for _, p := range s.Properties {
		plainTypes(p)
	}
	plainTypes(s.Items)
}

// Spec describes a tool for a model: its name, what it does, and the JSON
// Schema of its arguments.
type Spec struct {
	Name        string
	Description string
	Schema      json.RawMessage
}

// WithEnum returns schema with the property prop limited to values (for an
// array property, its items): closed sets (signal names, key names) are
// enums, which models follow.
func WithEnum(schema json.RawMessage, prop string, values []string) json.RawMessage {
	var s map[string]any
	if err := json.Unmarshal(schema, &s); err != nil {
		panic(fmt.Sprintf("toolargs: WithEnum: %v", err))
	}
	props, _ := s["properties"].(map[string]any)
	p, ok := props[prop].(map[string]any)
	if !ok {
		panic(fmt.Sprintf("toolargs: WithEnum: no property %q", prop))
	}
	if items, ok := p["items"].(map[string]any); ok {
		p = items
	}
	p["enum"] = values
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("toolargs: WithEnum: %v", err))
	}
	return b
}
