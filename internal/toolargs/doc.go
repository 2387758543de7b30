// Package toolargs decodes the JSON arguments of a tool call strictly: an
// unknown field, a second JSON value or a missing object is an error that
// names the tool and what was wrong, so a model's typo is reported instead
// of silently ignored.
package toolargs
