package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"time"

	"github.com/creack/pty"

	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/internal/procfs"
)

// TerminalOptions configure RunTerminal.
type TerminalOptions struct {
	// Iterations is the number of samples of each scenario.
	Iterations int
}

// DefaultTerminalOptions are the figures `dsh-actors bench terminal` uses.
func DefaultTerminalOptions() TerminalOptions { return TerminalOptions{Iterations: 50} }

// TerminalReport is the result of RunTerminal.
type TerminalReport struct {
	Scenarios []Scenario `json:"scenarios"`
	// Reasons counts why each wait of the run ended (prompt, stdin_read, ...).
	Reasons    map[string]int `json:"ready_reasons"`
	Errors     int            `json:"errors"`
	FirstError string         `json:"first_error,omitempty"`
	// Skipped names the scenarios left out, and why.
	Skipped []string `json:"skipped,omitempty"`
}

// RunTerminal measures the terminal tools through the whole path, each
// scenario interleaved with its floor: the same program on a bare PTY, read
// until its prompt, with no actors and no readiness proof.
//
//   - open_bash: terminal_open of an interactive bash until its prompt;
//   - open_python: terminal_open of a python3 REPL until it reads input;
//   - send_python: terminal_send of 1+1 to that REPL until it reads again;
//   - send_node: the same to node's REPL, an event loop (skipped, and said
//     so, without node on PATH).
func RunTerminal(ctx context.Context, h *host.Host, opts TerminalOptions) (TerminalReport, error) {
	rep := TerminalReport{Reasons: map[string]int{}}
	var errs errorCount
	const agent = "bench-terminal"
	defer h.StopAgent(ctx, agent)

	call := func(tool, args string) (map[string]any, time.Duration) {
		t0 := time.Now()
		r, err := h.Call(ctx, agent, tool, json.RawMessage(args))
		d := time.Since(t0)
		if err != nil {
			errs.add("%s: %v", tool, err)
			return nil, d
		}
		var data map[string]any
		_ = json.Unmarshal(r.Data, &data)
		if r.IsError {
			errs.add("%s: %s", tool, r.Text)
		}
		if reason, ok := data["ready_reason"].(string); ok {
			rep.Reasons[reason]++
		}
		return data, d
	}
	closeTerminal := func(data map[string]any) {
		if id, ok := data["terminal_id"].(string); ok {
			call("terminal_close", `{"terminal_id":"`+id+`"}`)
		}
	}

	var full, floor []time.Duration
	for i := 0; i < opts.Iterations; i++ {
		d, err := floorOpen(ctx, []string{"bash", "--norc", "--noprofile", "-i"}, []string{"PS1=$ "}, "$ ")
		if err != nil {
			return rep, fmt.Errorf("floor: %w", err)
		}
		floor = append(floor, d)
		data, took := call("terminal_open", `{}`)
		full = append(full, took)
		closeTerminal(data)
	}
	rep.Scenarios = append(rep.Scenarios, scenario("open_bash", full, floor))

	full, floor = nil, nil
	for i := 0; i < opts.Iterations; i++ {
		d, err := floorOpen(ctx, []string{"python3", "-q"}, nil, ">>> ")
		if err != nil {
			return rep, fmt.Errorf("floor: %w", err)
		}
		floor = append(floor, d)
		data, took := call("terminal_open", `{"command":"python3 -q"}`)
		full = append(full, took)
		closeTerminal(data)
	}
	rep.Scenarios = append(rep.Scenarios, scenario("open_python", full, floor))

	fp, err := startFloorProgram([]string{"python3", "-q"}, nil)
	if err != nil {
		return rep, fmt.Errorf("floor: %w", err)
	}
	defer fp.close()
	if _, err := fp.until(">>> "); err != nil {
		return rep, fmt.Errorf("floor: %w", err)
	}
	data, _ := call("terminal_open", `{"command":"python3 -q"}`)
	id, _ := data["terminal_id"].(string)
	full, floor = nil, nil
	for i := 0; i < opts.Iterations*4; i++ {
		t0 := time.Now()
		fp.ptmx.Write([]byte("1+1\r"))
		if _, err := fp.until("2\r\n>>> "); err != nil {
			return rep, fmt.Errorf("floor: %w", err)
		}
		floor = append(floor, time.Since(t0))
		_, took := call("terminal_send", `{"terminal_id":"`+id+`","text":"1+1","keys":["Enter"]}`)
		full = append(full, took)
	}
	rep.Scenarios = append(rep.Scenarios, scenario("send_python", full, floor))
	closeTerminal(data)

	if _, err := exec.LookPath("node"); err != nil {
		rep.Skipped = append(rep.Skipped, "send_node: node is not on PATH")
	} else if err := sendREPL(&rep, call, closeTerminal, []string{"node"}, "> ", "2\r\n> ", opts.Iterations*4); err != nil {
		return rep, err
	}
	rep.Errors, rep.FirstError = errs.get()
	return rep, nil
}

// sendREPL measures send_<argv[0]>: a terminal_send of 1+1 to an event-loop
// REPL until it is proven reading again, next to the same step on a bare
// PTY read until the answer and the prompt.
func sendREPL(rep *TerminalReport, call func(tool, args string) (map[string]any, time.Duration), closeTerminal func(map[string]any),
	argv []string, prompt, answer string, n int) error {
	fp, err := startFloorProgram(argv, nil)
	if err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	defer fp.close()
	if _, err := fp.until(prompt); err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	data, _ := call("terminal_open", fmt.Sprintf(`{"command":%q}`, argv[0]))
	defer closeTerminal(data)
	id, _ := data["terminal_id"].(string)
	var full, floor []time.Duration
	for i := 0; i < n; i++ {
		t0 := time.Now()
		fp.ptmx.Write([]byte("1+1\r"))
		if _, err := fp.until(answer); err != nil {
			return fmt.Errorf("floor: %w", err)
		}
		floor = append(floor, time.Since(t0))
		_, took := call("terminal_send", `{"terminal_id":"`+id+`","text":"1+1","keys":["Enter"]}`)
		full = append(full, took)
	}
	rep.Scenarios = append(rep.Scenarios, scenario("send_"+argv[0], full, floor))
	return nil
}

// floorProgram is a program on a bare PTY, read from one goroutine.
type floorProgram struct {
	cmd  *exec.Cmd
	ptmx *os.File
	buf  []byte
	acc  []byte
}

func startFloorProgram(argv, env []string) (*floorProgram, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), "TERM=dumb"), env...)
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 120, Rows: 40})
	if err != nil {
		return nil, err
	}
	return &floorProgram{cmd: cmd, ptmx: ptmx, buf: make([]byte, 32<<10)}, nil
}

// until reads until the output ends with pattern.
func (f *floorProgram) until(pattern string) ([]byte, error) {
	watchdog := time.AfterFunc(10*time.Second, func() { f.cmd.Process.Kill() })
	defer watchdog.Stop()
	for !bytes.HasSuffix(f.acc, []byte(pattern)) {
		n, err := f.ptmx.Read(f.buf)
		f.acc = append(f.acc, f.buf[:n]...)
		if err != nil {
			return nil, fmt.Errorf("reading until %q: %w (got %q)", pattern, err, f.acc)
		}
	}
	out := f.acc
	f.acc = nil
	return out, nil
}

func (f *floorProgram) close() {
	_ = procfs.KillSession(f.cmd.Process.Pid, 5*time.Second)
	_ = f.cmd.Wait()
	f.ptmx.Close()
}

// floorOpen times starting a program on a bare PTY until its prompt.
func floorOpen(ctx context.Context, argv, env []string, prompt string) (time.Duration, error) {
	t0 := time.Now()
	f, err := startFloorProgram(argv, env)
	if err != nil {
		return 0, err
	}
	defer f.close()
	if _, err := f.until(prompt); err != nil {
		return 0, err
	}
	return time.Since(t0), ctx.Err()
}

// WriteTable prints a report for people.
func (r TerminalReport) WriteTable(w io.Writer) error {
	if err := writeScenarios(w, r.Scenarios); err != nil {
		return err
	}
	reasons := make([]string, 0, len(r.Reasons))
	for k := range r.Reasons {
		reasons = append(reasons, k)
	}
	sort.Strings(reasons)
	for _, sk := range r.Skipped {
		fmt.Fprintf(w, "skipped %s\n", sk)
	}
	fmt.Fprint(w, "\nreadiness reasons:")
	for _, k := range reasons {
		fmt.Fprintf(w, " %s=%d", k, r.Reasons[k])
	}
	_, err := fmt.Fprintf(w, "\n%d errors\n", r.Errors)
	if err == nil && r.FirstError != "" {
		_, err = fmt.Fprintf(w, "first error: %s\n", r.FirstError)
	}
	return err
}
