package messages

// ErrorResult is the answer to a call that failed (bad arguments, a tool
// that could not run): text for the model, IsError set, no data.
func ErrorResult(callID, tool, text string) *ToolResult {
	return &ToolResult{CallId: callID, Tool: tool, Text: text, IsError: true}
}
