package hosts

import (
	"encoding/json"
	"net/http"
	"strings"
)

// gemini is the Gemini API as Gemini CLI uses it: POST
// /v1beta/models/MODEL:streamGenerateContent?alt=sse, answered with
// server-sent events, each a GenerateContentResponse. A result comes back
// as a functionResponse part of a user turn; its "response" object is what
// the model is given.
type gemini struct{}

type geminiPart struct {
	Text             *string `json:"text"`
	FunctionResponse *struct {
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
}

// geminiResult is the text of a functionResponse's response: the string
// when it is {"output": "…"} (or {"error": "…"}), else the object as JSON.
func geminiResult(raw json.RawMessage) string {
	var o map[string]json.RawMessage
	if json.Unmarshal(raw, &o) == nil && len(o) == 1 {
		for _, k := range []string{"output", "error"} {
			var s string
			if v, ok := o[k]; ok && json.Unmarshal(v, &s) == nil {
				return s
			}
		}
	}
	return string(raw)
}

func (gemini) handler(m *model) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1beta/models/", func(w http.ResponseWriter, r *http.Request) {
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		_, method, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v1beta/models/"), ":")
		if method == "countTokens" {
			m.log(r, body, jsonAnswer(w, map[string]any{"totalTokens": 100}))
			return
		}
		var req struct {
			Contents []struct {
				Role  string       `json:"role"`
				Parts []geminiPart `json:"parts"`
			} `json:"contents"`
			Tools []struct {
				FunctionDeclarations []struct {
					Name string `json:"name"`
				} `json:"functionDeclarations"`
			} `json:"tools"`
			GenerationConfig struct {
				ResponseMimeType string `json:"responseMimeType"`
			} `json:"generationConfig"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			m.problem("gemini: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var c conversation
		for _, t := range req.Tools {
			for _, f := range t.FunctionDeclarations {
				c.tools = append(c.tools, f.Name)
			}
		}
		for _, content := range req.Contents {
			for _, p := range content.Parts {
				if p.FunctionResponse != nil {
					c.results = append(c.results, geminiResult(p.FunctionResponse.Response))
				}
			}
		}
		var parts []any
		switch {
		case req.GenerationConfig.ResponseMimeType == "application/json":
			// A side question of the host's (whose turn is next, a
			// router's choice): the model hands the turn back.
			parts = []any{map[string]any{"text": `{"reasoning": "The script is scripted.", "next_speaker": "user"}`}}
		case len(c.tools) == 0:
			parts = []any{map[string]any{"text": "ok"}}
		default:
			rep := m.next(c)
			if rep.tool != "" {
				parts = []any{map[string]any{"functionCall": map[string]any{"name": rep.tool, "args": rep.args}}}
			} else {
				parts = []any{map[string]any{"text": rep.text}}
			}
		}
		answer := map[string]any{
			"candidates": []any{map[string]any{
				"content":      map[string]any{"role": "model", "parts": parts},
				"finishReason": "STOP", "index": 0,
			}},
			"usageMetadata": map[string]any{"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110},
			"modelVersion":  "gemini-2.5-pro",
		}
		if method == "streamGenerateContent" {
			s := newSSE(w)
			s.event("", answer)
			m.log(r, body, s.log.String())
			return
		}
		m.log(r, body, jsonAnswer(w, answer))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := readBody(w, r)
		m.log(r, body, "404")
		m.problem("gemini: unexpected request %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	})
	return mux
}
