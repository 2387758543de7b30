package ptyproc_test

import (
	"slices"
	"testing"

	"github.com/dsh-actors/dsh-actors/internal/ptyproc"
)

// The server's token never passes from the base environment to a program
// the runtime starts, the host's own environment included; one that set
// gives (an agent's explicit env for its terminal) is the agent's.
func TestBuildEnvKeepsTheServersToken(t *testing.T) {
	base := []string{"A=1", ptyproc.TokenVariable + "=secret", "B=2"}
	if got, want := ptyproc.BuildEnv(base, map[string]bool{"B": true}, map[string]string{"C": "3"}), []string{"A=1", "C=3"}; !slices.Equal(got, want) {
		t.Errorf("from a base: %q, want %q", got, want)
	}
	t.Setenv(ptyproc.TokenVariable, "secret")
	if got := ptyproc.BuildEnv(nil, nil, nil); slices.Contains(got, ptyproc.TokenVariable+"=secret") {
		t.Errorf("from the host's environment: %q", got)
	}
	if got := ptyproc.BuildEnv(base, nil, map[string]string{ptyproc.TokenVariable: "given"}); !slices.Contains(got, ptyproc.TokenVariable+"=given") || slices.Contains(got, ptyproc.TokenVariable+"=secret") {
		t.Errorf("given by set: %q", got)
	}
}
