package hosts

import (
	"encoding/json"
	"net/http"
)

// responses is the OpenAI Responses API as Codex uses it: POST
// /v1/responses with "stream": true, answered with server-sent events
// (response.created, response.output_item.done for each output item,
// response.completed). Codex offers the tools of an MCP server as one
// "namespace" tool (mcp__dsh_actors) holding its functions; a call names
// the namespace and the function. A result comes back as a
// function_call_output input item, its output a string or a list of
// content items.
type responses struct{}

type responsesTool struct {
	Type  string          `json:"type"`
	Name  string          `json:"name"`
	Tools []responsesTool `json:"tools"`
}

func (responses) handler(m *model) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		m.log(r, nil, jsonAnswer(w, map[string]any{"object": "list", "data": []any{}, "models": []any{}}))
	})
	mux.HandleFunc("POST /v1/responses", func(w http.ResponseWriter, r *http.Request) {
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		var req struct {
			Model string          `json:"model"`
			Tools []responsesTool `json:"tools"`
			Input []struct {
				Type   string          `json:"type"`
				Output json.RawMessage `json:"output"`
			} `json:"input"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			m.problem("responses: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var c conversation
		// A function of a namespace is offered to the script as
		// "NAMESPACE__NAME", and called as NAME in NAMESPACE.
		type function struct{ namespace, name string }
		functions := map[string]function{}
		for _, t := range req.Tools {
			if t.Type == "namespace" {
				for _, f := range t.Tools {
					full := t.Name + "__" + f.Name
					c.tools = append(c.tools, full)
					functions[full] = function{t.Name, f.Name}
				}
				continue
			}
			c.tools = append(c.tools, t.Name)
			functions[t.Name] = function{name: t.Name}
		}
		for _, in := range req.Input {
			switch in.Type {
			case "function_call_output", "custom_tool_call_output", "mcp_tool_call_output":
				c.results = append(c.results, textOf(in.Output))
			}
		}
		rep := m.next(c)
		var item map[string]any
		if rep.tool != "" {
			f := functions[rep.tool]
			item = map[string]any{"type": "function_call", "id": "fc_" + rep.id, "call_id": rep.id,
				"name": f.name, "arguments": string(rep.args), "status": "completed"}
			if f.namespace != "" {
				item["namespace"] = f.namespace
			}
		} else {
			item = map[string]any{"type": "message", "id": "msg_final", "role": "assistant", "status": "completed",
				"content": []any{map[string]any{"type": "output_text", "text": rep.text, "annotations": []any{}}}}
		}
		resp := map[string]any{"id": "resp_" + rep.id + "x", "object": "response", "model": req.Model, "status": "in_progress", "output": []any{}}
		s := newSSE(w)
		s.event("response.created", map[string]any{"type": "response.created", "response": resp})
		s.event("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0, "item": item})
		s.event("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
		done := map[string]any{}
		for k, v := range resp {
			done[k] = v
		}
		done["status"] = "completed"
		done["output"] = []any{item}
		done["usage"] = map[string]any{"input_tokens": 100, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": 10, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 110}
		s.event("response.completed", map[string]any{"type": "response.completed", "response": done})
		m.log(r, body, s.log.String())
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := readBody(w, r)
		m.log(r, body, "404")
		m.problem("responses: unexpected request %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	})
	return mux
}

// chat is the OpenAI Chat Completions API as opencode's
// @ai-sdk/openai-compatible provider uses it: POST /v1/chat/completions
// with "stream": true, answered with chunks and "data: [DONE]". A result
// comes back as a "tool" message, its content a string or a list of parts.
type chat struct{}

func (chat) handler(m *model) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		var req struct {
			Model    string `json:"model"`
			Stream   bool   `json:"stream"`
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
			Tools []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			m.problem("chat: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var c conversation
		for _, t := range req.Tools {
			c.tools = append(c.tools, t.Function.Name)
		}
		for _, msg := range req.Messages {
			if msg.Role == "tool" {
				c.results = append(c.results, textOf(msg.Content))
			}
		}
		var rep reply
		if len(c.tools) == 0 {
			rep = reply{text: "A title"} // not the agent's loop: a title, a summary
		} else {
			rep = m.next(c)
		}
		chunk := func(delta map[string]any, finish any) map[string]any {
			return map[string]any{"id": "chatcmpl-" + rep.id, "object": "chat.completion.chunk", "created": 1700000000, "model": req.Model,
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		}
		if !req.Stream {
			msg := map[string]any{"role": "assistant", "content": rep.text}
			finish := "stop"
			if rep.tool != "" {
				msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
					"id": rep.id, "type": "function", "function": map[string]any{"name": rep.tool, "arguments": string(rep.args)}}}}
				finish = "tool_calls"
			}
			m.log(r, body, jsonAnswer(w, map[string]any{"id": "chatcmpl-" + rep.id, "object": "chat.completion", "created": 1700000000, "model": req.Model,
				"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
				"usage":   map[string]any{"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}}))
			return
		}
		s := newSSE(w)
		if rep.tool != "" {
			s.event("", chunk(map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"index": 0, "id": rep.id, "type": "function",
				"function": map[string]any{"name": rep.tool, "arguments": string(rep.args)}}}}, nil))
			s.event("", chunk(map[string]any{}, "tool_calls"))
		} else {
			s.event("", chunk(map[string]any{"role": "assistant", "content": rep.text}, nil))
			s.event("", chunk(map[string]any{}, "stop"))
		}
		usage := chunk(map[string]any{}, nil)
		usage["choices"] = []any{}
		usage["usage"] = map[string]any{"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
		s.event("", usage)
		s.event("", "[DONE]")
		m.log(r, body, s.log.String())
	})
	mux.HandleFunc("/npm-registry/", func(w http.ResponseWriter, r *http.Request) {
		m.log(r, nil, "404")
		http.NotFound(w, r)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := readBody(w, r)
		m.log(r, body, "404")
		m.problem("chat: unexpected request %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	})
	return mux
}
