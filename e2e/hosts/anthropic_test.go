package hosts

import (
	"encoding/json"
	"net/http"
)

// anthropic is the Anthropic Messages API as Claude Code uses it: POST
// /v1/messages with "stream": true, answered with server-sent events
// (message_start, content blocks, message_delta, message_stop). A tool
// result comes back as a "tool_result" block of a user message, its content
// a string or a list of blocks.
type anthropic struct{}

type anthropicRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

func (anthropic) handler(m *model) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages/count_tokens", func(w http.ResponseWriter, r *http.Request) {
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		m.log(r, body, jsonAnswer(w, map[string]any{"input_tokens": 100}))
	})
	mux.HandleFunc("POST /v1/messages", func(w http.ResponseWriter, r *http.Request) {
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		var req anthropicRequest
		if err := json.Unmarshal(body, &req); err != nil {
			m.problem("anthropic: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var c conversation
		for _, t := range req.Tools {
			c.tools = append(c.tools, t.Name)
		}
		for _, msg := range req.Messages {
			var blocks []struct {
				Type    string          `json:"type"`
				Content json.RawMessage `json:"content"`
			}
			if json.Unmarshal(msg.Content, &blocks) != nil {
				continue // a string: plain text
			}
			for _, b := range blocks {
				if b.Type == "tool_result" {
					c.results = append(c.results, textOf(b.Content))
				}
			}
		}
		var rep reply
		if len(c.tools) == 0 {
			// Not the agent's loop (a title, a check): plain text.
			rep = reply{text: "ok"}
		} else {
			rep = m.next(c)
		}
		model := req.Model
		if model == "" {
			model = "fake-model"
		}
		if !req.Stream {
			m.log(r, body, jsonAnswer(w, anthropicMessage(model, rep)))
			return
		}
		s := newSSE(w)
		msg := anthropicMessage(model, rep)
		msg["content"] = []any{}
		msg["stop_reason"] = nil
		s.event("message_start", map[string]any{"type": "message_start", "message": msg})
		if rep.tool != "" {
			s.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
				"content_block": map[string]any{"type": "tool_use", "id": "toolu_" + rep.id, "name": rep.tool, "input": map[string]any{}}})
			s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": string(rep.args)}})
		} else {
			s.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
				"content_block": map[string]any{"type": "text", "text": ""}})
			s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
				"delta": map[string]any{"type": "text_delta", "text": rep.text}})
		}
		s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
		s.event("message_delta", map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": anthropicStop(rep), "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": 10}})
		s.event("message_stop", map[string]any{"type": "message_stop"})
		m.log(r, body, s.log.String())
	})
	// Claude Code checks that the API is reachable with HEAD /.
	mux.HandleFunc("HEAD /{$}", func(w http.ResponseWriter, r *http.Request) { m.log(r, nil, "200") })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := readBody(w, r)
		m.log(r, body, "404")
		m.problem("anthropic: unexpected request %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	})
	return mux
}

func anthropicStop(rep reply) string {
	if rep.tool != "" {
		return "tool_use"
	}
	return "end_turn"
}

// anthropicMessage is the whole message (the non-streaming answer, and
// message_start's message without its content).
func anthropicMessage(model string, rep reply) map[string]any {
	var content []any
	if rep.tool != "" {
		content = []any{map[string]any{"type": "tool_use", "id": "toolu_" + rep.id, "name": rep.tool, "input": rep.args}}
	} else {
		content = []any{map[string]any{"type": "text", "text": rep.text}}
	}
	return map[string]any{
		"id": "msg_" + rep.id + "x", "type": "message", "role": "assistant", "model": model,
		"content": content, "stop_reason": anthropicStop(rep), "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 100, "output_tokens": 10},
	}
}
