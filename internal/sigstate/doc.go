// Package sigstate reads the signal state that this process hands to the
// programs it starts, and re-executes the program with a clean one.
//
// A child starts with the signal mask of the Go runtime's first thread as
// it was when the process began, and with every signal that was set to
// SIG_IGN still ignored (exec resets caught signals, never ignored ones). Go
// offers no way to give a child anything else: syscall.SysProcAttr has no
// signal-mask field and the runtime restores its saved start-up mask in the
// forked child. So a host started with SIGWINCH blocked (some CI runners do
// this) starts terminal programs that never see a resize; one started with
// `&` from a script or under nohup starts them with SIGINT or SIGHUP
// ignored, so ^C and task_kill's SIGINT do nothing. (The runtime keeps an
// inherited SIG_IGN only for those two; but a program that calls
// signal.Ignore(SIGPIPE) itself starts shells in which `yes | head -1`
// complains about a broken pipe: catch SIGPIPE with signal.Notify instead.)
//
// [Inherited] tells what children would get. [Reexec] fixes it for the whole
// process the only way Go allows: it clears the mask on the calling thread,
// turns ignored signals into caught ones (which exec resets to the default)
// and executes the same program again with the same arguments and
// environment. A program calls it first thing in main, before it starts
// anything; it costs one exec, and only when the state is not clean.
package sigstate
