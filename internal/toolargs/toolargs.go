// Package toolargs decodes the JSON arguments of a tool call strictly: an
// unknown field, a second JSON value or a missing object is an error that
// names the tool and what was wrong, so a model's typo is reported instead
// of silently ignored.
package toolargs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
)

// Decode decodes raw into v. Empty or null arguments decode as {} when
// allowEmpty is true, and are an error otherwise. example is shown in the
// error for missing arguments.
func Decode(tool string, raw []byte, v any, allowEmpty bool, example string) error {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		if allowEmpty {
			return nil
		}
		return fmt.Errorf("%s: arguments missing: expected a JSON object like %s", tool, example)
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: invalid arguments: %w", tool, err)
	}
	if dec.More() {
		return errors.New(tool + ": invalid arguments: more than one JSON value")
	}
	return nil
}

// Schema returns the JSON Schema of T's JSON form (generated from the Go
// type and its `jsonschema` tags), without the properties named in omit.
func Schema[T any](omit ...string) json.RawMessage {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		// The argument types are this project's own: a failure is a bug.
		panic(fmt.Sprintf("toolargs: schema of %T: %v", *new(T), err))
	}
	for _, name := range omit {
		delete(s.Properties, name)
		s.Required = slices.DeleteFunc(s.Required, func(r string) bool { return r == name })
		s.PropertyOrder = slices.DeleteFunc(s.PropertyOrder, func(r string) bool { return r == name })
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("toolargs: schema of %T: %v", *new(T), err))
	}
	return b
}

// Spec describes a tool for a model: its name, what it does, and the JSON
// Schema of its arguments.
type Spec struct {
	Name        string
	Description string
	Schema      json.RawMessage
}
