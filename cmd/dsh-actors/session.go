package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/messages"
	"github.com/dsh-actors/dsh-actors/sessionlog"
)

// sessionPrefix marks the lines of `call` that speak the session protocol
// instead of calling a tool (see the README, "Turns from any language").
const sessionPrefix = "session."

// sessionCall runs one session line: begin_turn, prepare_step, record or
// inject. The answer's data is JSON; events in it are in protobuf's JSON
// form of messages.Event.
func sessionCall(ctx context.Context, h *host.Host, agentID, op string, args json.RawMessage) (data any, err error) {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	switch op {
	case "begin_turn":
		var a struct {
			Text string `json:"text"`
		}
		if err := strictJSON(args, &a); err != nil {
			return nil, err
		}
		turn, err := h.BeginTurn(ctx, agentID, a.Text)
		return map[string]any{"turn": turn}, err
	case "prepare_step":
		var a struct {
			Turn    uint32 `json:"turn"`
			Step    uint32 `json:"step"`
			Visible bool   `json:"visible"`
		}
		if err := strictJSON(args, &a); err != nil {
			return nil, err
		}
		prep, err := h.PrepareStep(ctx, agentID, a.Turn, a.Step)
		if prep == nil {
			return nil, err
		}
		if len(prep.Injected) == 0 && err != nil {
			return nil, err
		}
		out := map[string]any{"injected": eventsJSON(prep.Injected), "visible_count": len(prep.Visible)}
		if a.Visible {
			out["visible"] = eventsJSON(prep.Visible)
		}
		if err != nil {
			out["error"] = err.Error()
		}
		return out, err
	case "record":
		var a struct {
			Event json.RawMessage `json:"event"`
		}
		if err := strictJSON(args, &a); err != nil {
			return nil, err
		}
		ev := &messages.Event{}
		if err := protojson.Unmarshal(a.Event, ev); err != nil {
			return nil, fmt.Errorf(`"event" is not a session event: %v`, err)
		}
		seq, err := h.Record(ctx, agentID, ev)
		return map[string]any{"seq": seq}, err
	case "inject":
		var a struct {
			Text   string `json:"text"`
			Source struct {
				Kind   string `json:"kind"`
				Plugin string `json:"plugin"`
			} `json:"source"`
		}
		if err := strictJSON(args, &a); err != nil {
			return nil, err
		}
		var src *messages.Source
		if a.Source.Kind != "" || a.Source.Plugin != "" {
			src = &messages.Source{Kind: a.Source.Kind, Plugin: a.Source.Plugin}
		}
		seq, err := h.Inject(ctx, agentID, a.Text, src)
		return map[string]any{"seq": seq}, err
	}
	return nil, fmt.Errorf("unknown session operation %q (there are begin_turn, prepare_step, record and inject)", op)
}

func strictJSON(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad arguments: %v", err)
	}
	return nil
}

func eventsJSON(recs []sessionlog.Record) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(recs))
	for _, r := range recs {
		b, err := protojson.Marshal(r.Event)
		if err != nil {
			continue
		}
		out = append(out, json.RawMessage(fmt.Sprintf(`{"seq":%d,"event":%s}`, r.Seq, b)))
	}
	return out
}
