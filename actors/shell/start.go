package shell

import (
	"fmt"
	"os"
	"os/exec"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/internal/inband"
	"github.com/dsh-actors/dsh-actors/internal/procfs"
	"github.com/dsh-actors/dsh-actors/internal/ptyproc"
)

func (a *Actor) startShell() error {
	bash := a.opts.Bash
	if bash == "" {
		bash = "bash"
	}
	a.bash = bashState{learn: true}
	a.waiting = nil
	path, err := exec.LookPath(bash)
	if err != nil {
		return fmt.Errorf("program %q: %w", bash, err)
	}
	if key, ok := binaryKey(path); ok {
		a.bash.binary = key
		_, known := layouts.Load(key)
		a.bash.learn = !known
	}
	env, err := shellEnv(a.opts.Env, a.opts.Config)
	if err != nil {
		return err
	}
	if dir := a.opts.Dir; dir != "" {
		// exec names the program when it is the directory that is missing.
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return fmt.Errorf("its working directory %q is not a directory that exists", dir)
		}
	}
	proc, err := ptyproc.StartIn(a.opts.Sandbox, ptyproc.Options{
		Path:    path,
		Args:    []string{"--norc", "--noprofile", "--noediting", "-i"},
		Env:     env,
		Dir:     a.opts.Dir,
		Cols:    shellCols,
		Rows:    shellRows,
		Literal: true,
	}, a.send)
	if err != nil {
		return err
	}
	a.proc = proc
	// bash's read count, looked at around each line (readShort); without
	// it, a line split with another reader goes unnoticed, as before.
	a.io, _ = procfs.OpenIOCounter(proc.PID())
	a.proto = newProtocol(proc.TTYName())
	a.stream = inband.Stream{Scanner: a.proto.scan}
	return nil
}

// shellEnv is the base environment without what would change bash's prompt,
// start-up or history, plus what makes programs behave for a reader that is
// not a human at a screen.
func shellEnv(base []string, cfg Config) ([]string, error) {
	drop := map[string]bool{
		"PROMPT_COMMAND": true, "PS0": true, "PS1": true, "PS2": true, "PS4": true,
		"BASH_ENV": true, "ENV": true, "SHELLOPTS": true, "BASHOPTS": true,
		"TMOUT": true, // an inherited idle timeout would log the shell out between calls
	}
	// PS1 and PS2 are set by the start-up line as shell variables, not
	// exported, so programs and nested shells do not inherit them.
	// Activation scripts that would rewrite PS1 are asked not to.
	set := map[string]string{
		"TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat",
		"VIRTUAL_ENV_DISABLE_PROMPT": "1", "CONDA_CHANGEPS1": "false",
	}
	if !cfg.HostHistory {
		// An empty HISTFILE: bash neither loads the host user's history at
		// start nor writes one at exit; the history stays in memory.
		set["HISTFILE"] = ""
	} else {
		drop["HISTFILE"] = true
	}
	if !cfg.HostStartupFiles {
		rc, err := inputrcPath()
		if err != nil {
			return nil, fmt.Errorf("writing the shell's readline configuration: %w", err)
		}
		set["INPUTRC"] = rc
	} else {
		drop["INPUTRC"] = true
	}
	return ptyproc.BuildEnv(base, drop, set), nil
}

func (a *Actor) startLine(i int) {
	ex := a.write(stepStart, a.proto.initLines(a.bash.learn, a.opts.Config.HostHistory)[i])
	ex.startLine = i
	a.armStep(startTimeout)
}

// startProbe learns bash's own input reads from the start-up lines, when no
// command of anyone's has run yet.
func (a *Actor) startProbe(ctx actor.Context, p *ptyproc.Probe) {
	ex := &a.ex
	if len(ex.ps1) == 0 || p.Err != nil || !p.Drained || p.InputPending || p.Pgrp != a.proc.PID() || !plausiblePrompt(p.Leader) {
		if a.wait.Owns(p) {
			a.wait.Probe(p) // for its next look
		} else if len(ex.ps1) > 0 {
			a.reprobe(p)
		}
		return
	}
	lines := a.proto.initLines(a.bash.learn, a.opts.Config.HostHistory)
	switch l := p.Leader; {
	case ex.startLine == 0 && a.bash.learn:
		if l.Nr != sysPselect6 {
			a.startFailed(ctx, fmt.Sprintf("bash did not wait for input through readline after `set -o emacs` (%s)", l))
			return
		}
		a.bash.sigs.readline = l
	default: // the last line: bash's plain read
		if l.Nr != sysRead {
			a.startFailed(ctx, fmt.Sprintf("bash did not read its input with read(2) at the prompt (%s)", l))
			return
		}
		a.bash.sigs.plain = l
		if a.bash.learn {
			if a.bash.binary != "" {
				layouts.Store(a.bash.binary, layoutOf(a.bash.sigs))
			}
		} else {
			lay, _ := layouts.Load(a.bash.binary)
			a.bash.sigs.readline = lay.(readlineLayout).apply(l)
		}
	}
	m := ex.ps1[len(ex.ps1)-1]
	a.bash.seq, a.bash.seqKnown = m.seq, true
	a.bash.optsSeen = m.opts // no command has run: extdebug is off
	if ex.startLine < len(lines)-1 {
		a.startLine(ex.startLine + 1)
		return
	}
	a.bash.started = true
	a.begin(stepText) // nothing of start-up is pending
	a.next(ctx)
}

func (a *Actor) startFailed(ctx actor.Context, why string) {
	c := a.cur
	a.finish(ctx, c, Result{Text: "bash: could not start the shell: " + why, IsError: true})
	a.reset(ResetBroken, why, nil)
}
