package terminal

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestHistoryNormalisesCRLFAcrossChunks(t *testing.T) {
	h := newHistory(1 << 20)
	for _, c := range []string{"a\r", "\nb\r\n", "c\rd\r", "\r\n"} {
		h.write([]byte(c))
	}
	got, _ := h.slice(0, h.end())
	if string(got) != "a\nb\nc\rd\r\n" {
		t.Fatalf("%q", got)
	}
}

func TestHistoryDropsTheOldestAndSaysWhere(t *testing.T) {
	h := newHistory(4096)
	for i := 0; i < 100; i++ {
		h.write([]byte(strings.Repeat("x", 100)))
	}
	if h.end() != 10000 || h.first() != 10000-4096 {
		t.Fatalf("end %d first %d", h.end(), h.first())
	}
	b, from := h.slice(0, 50)
	if b != nil || from != h.first() {
		t.Fatalf("dropped range: %q from %d", b, from)
	}
	b, from = h.slice(9990, 20000)
	if len(b) != 10 || from != 9990 {
		t.Fatalf("%d bytes from %d", len(b), from)
	}
}

// Every rendering fits the cap, keeps its metadata whole and its text valid.
func TestRenderFitsTheCap(t *testing.T) {
	raw := []byte(strings.Repeat("é✓ line\n", 10000)) // 110 KB: more than every cap below
	for _, keepHead := range []bool{false, true} {
		for _, max := range []int{1024, 2000, 65536} {
			p := page{head: []string{"[head]"}, raw: raw, from: 100, asked: 40, tail: []string{"[tail one]", "[tail two]"}, keepHead: keepHead,
				cover: &coverage{id: "t1", end: 100 + int64(len(raw)), first: 100}}
			text, from, to := p.render(max)
			if len(text) > max || !utf8.ValidString(text) {
				t.Fatalf("max %d: %d bytes, valid %v", max, len(text), utf8.ValidString(text))
			}
			// What it says it shows is what it shows, and where the rest is.
			if shown := string(raw[from-100 : to-100]); from >= to || !strings.Contains(text, "\n"+shown) ||
				!strings.HasSuffix(text, fmt.Sprintf("covers output bytes %d-%d of %d; history retained from byte 100]", from, to, 100+len(raw))) {
				t.Fatalf("max %d, keepHead %v: shown %d-%d, text\n%s", max, keepHead, from, to, text)
			}
			if rest := fmt.Sprintf("offset %d", map[bool]int64{true: to, false: 100}[keepHead]); !strings.Contains(text, rest) {
				t.Fatalf("max %d, keepHead %v: the marker does not say %q:\n%s", max, keepHead, rest, text)
			}
			for _, want := range []string{"[head]", "[tail one]", "[tail two]", "60 bytes of output before offset 100 were dropped", "not shown"} {
				if !strings.Contains(text, want) {
					t.Fatalf("max %d, keepHead %v: %q missing from\n%s", max, keepHead, want, text)
				}
			}
		}
	}
	small := page{raw: []byte("hi\n"), tail: []string{"[t]"}}
	if got, _, _ := small.render(1024); got != "hi\n[t]" {
		t.Fatalf("%q", got)
	}
}

// Every key and signal name the schema offers is one the tool takes.
func TestTheSchemasEnumsAreAccepted(t *testing.T) {
	for _, k := range KeyNames() {
		if b, err := EncodeKeys([]string{k}); err != nil || len(b) == 0 {
			t.Errorf("key %q from the schema: %v", k, err)
		}
	}
	for _, s := range SignalNames() {
		if _, err := ParseSignal(s); err != nil {
			t.Errorf("signal %q from the schema: %v", s, err)
		}
	}
}

// Where the history dropped its oldest bytes inside a character, what it
// returns from there starts at the next whole one.
func TestHistoryDropsNoHalfCharacter(t *testing.T) {
	for shift := range 3 {
		h := newHistory(30)
		h.write([]byte(strings.Repeat("€", 20) + strings.Repeat("y", shift)))
		got, from := h.slice(0, h.end())
		if !utf8.Valid(got) || len(got) == 0 || from < h.first() || from > h.first()+2 {
			t.Fatalf("shift %d: %q from %d (first %d)", shift, got, from, h.first())
		}
	}
}
