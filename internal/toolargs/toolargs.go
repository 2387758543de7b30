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
