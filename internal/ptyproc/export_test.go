package ptyproc

import "github.com/dsh-actors/dsh-actors/internal/sandbox"

// SetTestSandbox makes every Start without a sandbox of its own run in sb
// (the sandbox matrix runs this package's tests at each level).
func SetTestSandbox(sb *sandbox.Sandbox) { testSandbox = sb }
