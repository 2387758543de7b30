package ptyproc

import (
	"os/exec"
	"syscall"

	"github.com/dsh-actors/dsh-actors/internal/sandbox"
)

// program is the started program, however it was started: as this
// process's child, or by a sandbox's init.
type program interface {
	pid() int
	innerPID() int
	// wait returns once the program has ended and was reaped.
	wait() ExitStatus
	// kill sends SIGKILL to the program itself, never to a process that
	// reused its pid.
	kill()
	// release frees what refers to the program, once it was waited for.
	release()
}

type execProgram struct{ cmd *exec.Cmd }

func (e execProgram) pid() int      { return e.cmd.Process.Pid }
func (e execProgram) innerPID() int { return e.cmd.Process.Pid }
func (e execProgram) kill()         { _ = e.cmd.Process.Signal(syscall.SIGKILL) }
func (e execProgram) release()      {}

func (e execProgram) wait() ExitStatus {
	waitExit(e.cmd.Process.Pid)
	_ = e.cmd.Wait()
	if e.cmd.ProcessState == nil {
		return ExitStatus{Code: -1}
	}
	ws, ok := e.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok {
		return ExitStatus{Code: -1}
	}
	return exitStatusOf(ws)
}

func exitStatusOf(ws syscall.WaitStatus) ExitStatus {
	st := ExitStatus{Code: -1}
	switch {
	case ws.Signaled():
		st.Signal = ws.Signal()
	case ws.Exited():
		st.Code = ws.ExitStatus()
	}
	return st
}

type sandboxProgram struct{ k *sandbox.Child }

func (s sandboxProgram) pid() int      { return s.k.PID }
func (s sandboxProgram) innerPID() int { return s.k.InnerPID }
func (s sandboxProgram) kill()         { _ = s.k.Signal(syscall.SIGKILL) }
func (s sandboxProgram) release()      { s.k.PidFD.Close() }

func (s sandboxProgram) wait() ExitStatus {
	<-s.k.Exited()
	ws, lost := s.k.Status()
	if lost {
		// The sandbox ended first, and every process in it with it.
		return ExitStatus{Code: -1, Signal: syscall.SIGKILL}
	}
	return exitStatusOf(ws)
}
