// Package toolargs decodes the JSON arguments of a tool call strictly: an
// unknown field, a second JSON value or a missing object is an error that
// names the tool and what was wrong, so a model's typo is reported instead
// of silently ignored. The one exception is HostArguments, which MCP hosts
// add to every tool for themselves (Gemini CLI's wait_for_previous): they
// are taken and ignored.
package toolargs
