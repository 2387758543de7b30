package procfs

import (
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// parseStat takes the comm field from the first '(' to the last ')', so a
// name with spaces and parentheses of its own cannot shift the fields after
// it.
func TestParseStatComm(t *testing.T) {
	tests := []struct {
		line string
		want Proc
	}{
		{"42 (bash) S 1 42 42 34816 42 4194560 1 0\n",
			Proc{PID: 42, PPID: 1, PGRP: 42, Session: 42, State: 'S', TTYNr: 34816, Comm: "bash"}},
		{"7 (Web Content) R 3 5 6 0 -1 0\n",
			Proc{PID: 7, PPID: 3, PGRP: 5, Session: 6, State: 'R', Comm: "Web Content"}},
		// A name that looks like the end of the comm field and the start of
		// the next fields.
		{"9 (x) S 1 2 3 (y) Z 8 8 8 0 0\n",
			Proc{PID: 9, PPID: 8, PGRP: 8, Session: 8, State: 'Z', Comm: "x) S 1 2 3 (y"}},
		{"10 ((sd-pam)) S 1 10 10 0\n",
			Proc{PID: 10, PPID: 1, PGRP: 10, Session: 10, State: 'S', Comm: "(sd-pam)"}},
		{"11 ()) T 1 2 3 0\n",
			Proc{PID: 11, PPID: 1, PGRP: 2, Session: 3, State: 'T', Comm: ")"}},
		{"12 (() D 0 0 0 0\n",
			Proc{PID: 12, PPID: 0, PGRP: 0, Session: 0, State: 'D', Comm: "("}},
		{"13 () X 1 1 1 0",
			Proc{PID: 13, PPID: 1, PGRP: 1, Session: 1, State: 'X', Comm: ""}},
		// prctl(PR_SET_NAME) accepts a newline too.
		{"14 (a\nb) S 1 14 14 0\n",
			Proc{PID: 14, PPID: 1, PGRP: 14, Session: 14, State: 'S', Comm: "a\nb"}},
		{"  15 (lead) S 1 15 15 0\n",
			Proc{PID: 15, PPID: 1, PGRP: 15, Session: 15, State: 'S', Comm: "lead"}},
	}
	for _, tt := range tests {
		tt.line = padStat(tt.line, "777")
		tt.want.Start = 777
		got, err := parseStat([]byte(tt.line))
		if err != nil {
			t.Errorf("parseStat(%q): %v", tt.line, err)
			continue
		}
		if got != tt.want {
			t.Errorf("parseStat(%q) = %+v, want %+v", tt.line, got, tt.want)
		}
	}
}

// padStat completes a stat line cut after its first fields with zeros up to
// starttime (the 20th field after the name), which it sets to start.
func padStat(line, start string) string {
	end := strings.HasSuffix(line, "\n")
	line = strings.TrimSuffix(line, "\n")
	n := len(strings.Fields(line[strings.LastIndexByte(line, ')')+1:]))
	line += strings.Repeat(" 0", 19-n) + " " + start + " 0 0"
	if end {
		line += "\n"
	}
	return line
}

func TestParseStatMalformed(t *testing.T) {
	for _, line := range []string{
		"",
		"\n",
		"123",
		"123 (bash",                             // no closing parenthesis
		"123 bash) S 1 2 3",                     // no opening parenthesis
		"123 )bash( S 1 2 3",                    // closing before opening
		"(bash) S 1 2 3",                        // no pid
		"abc (bash) S 1 2 3",                    // pid not a number
		"12 3 (bash) S 1 2 3",                   // pid with a space in it
		"123 (bash)",                            // nothing after comm
		"123 (bash) S 1 2",                      // session missing
		"123 (bash) SS 1 2 3",                   // state of two letters
		"123 (bash) S x 2 3",                    // ppid not a number
		"123 (bash) S 1 x 3",                    // pgrp not a number
		"123 (bash) S 1 2 x",                    // session not a number
		"123 (bash) S 1 2 99999999999999999999", // overflow
		"123 (bash) S 1 2 3 0",                  // no start time
		padStat("123 (bash) S 1 2 3 0", "x"),    // start time not a number
	} {
		if p, err := parseStat([]byte(line)); err == nil {
			t.Errorf("parseStat(%q) = %+v, want an error", line, p)
		} else if !strings.HasPrefix(err.Error(), "procfs: ") {
			t.Errorf("parseStat(%q): error %q does not say where it comes from", line, err)
		}
	}
}

// The parser agrees with the kernel's own line for this process.
func TestParseStatSelf(t *testing.T) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	p, err := parseStat(b)
	if err != nil {
		t.Fatal(err)
	}
	if p.PID != os.Getpid() || p.PPID != os.Getppid() {
		t.Errorf("pid %d ppid %d, want %d %d", p.PID, p.PPID, os.Getpid(), os.Getppid())
	}
	// The session may be 0: a leader outside our pid namespace.
	sid, err := unix.Getsid(0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Session != sid || p.PGRP != unix.Getpgrp() || p.Zombie() {
		t.Errorf("this process: %+v, want session %d group %d", p, sid, unix.Getpgrp())
	}
	comm, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimSuffix(string(comm), "\n"); p.Comm != want {
		t.Errorf("comm %q, want %q", p.Comm, want)
	}
}

func TestZombie(t *testing.T) {
	for _, c := range []struct {
		state byte
		want  bool
	}{{'Z', true}, {'X', true}, {'R', false}, {'S', false}, {'D', false}, {'T', false}, {'t', false}, {'I', false}} {
		if got := (Proc{State: c.state}).Zombie(); got != c.want {
			t.Errorf("state %q: Zombie() = %v, want %v", c.state, got, c.want)
		}
	}
}

func TestWaitStateString(t *testing.T) {
	for s, want := range map[WaitState]string{
		NotWaiting:    "not_waiting",
		WaitingInput:  "waiting_input",
		WaitUnknown:   "wait_unknown",
		WaitState(42): "WaitState(42)",
	} {
		if got := s.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(s), got, want)
		}
	}
}

func TestParseStatCPU(t *testing.T) {
	// utime 25 and stime 7 are the 14th and 15th fields.
	p, err := parseStat([]byte("42 (bash) S 1 42 42 34816 42 4194560 1 0 0 0 25 7 0 0 20 0 1 0 777 0 0\n"))
	if err != nil || p.CPU != 32 || p.Start != 777 {
		t.Fatalf("%+v %v", p, err)
	}
}
