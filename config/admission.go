package config

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/dsh-actors/dsh-actors/internal/admission"
)

// Admission configures the host's gate for bash calls (the "admission"
// section): how many may be in their first steps at once, host-wide, the
// others waiting their turn in arrival order. See package admission for why
// a closed loop of many agents needs it.
type Admission struct {
	// Slots is how many bash calls may be starting at once. 0 means
	// SlotsPerCPU for each CPU Go may use (GOMAXPROCS); -1 turns the gate
	// off, so that every call starts at once.
	Slots int `yaml:"slots"`
	// LeaseMs is how long an admitted call keeps its slot: one still
	// running after that (a build, a sleep) lets the next call in.
	LeaseMs int64 `yaml:"leaseMs"`
}

// SlotsPerCPU is the default number of slots for each CPU: enough to keep
// the CPUs busy while a call waits on its terminal, few enough that the
// kernel's run queue stays short.
const SlotsPerCPU = 4

// maxSlots and maxLeaseMs bound what can be meant.
const (
	maxSlots   = 1 << 20
	maxLeaseMs = 60 * 1000
)

// DefaultAdmission is the gate's default: SlotsPerCPU slots a CPU, a lease
// of 10 ms (an echo under load takes about 1 ms).
func DefaultAdmission() Admission { return Admission{Slots: 0, LeaseMs: 10} }

// Validate names the key, the value and the rule of each error.
func (a Admission) Validate() error {
	var errs []error
	if a.Slots < -1 || a.Slots > maxSlots {
		errs = append(errs, fmt.Errorf("admission.slots: %d is out of range (must be -1 for no gate, 0 for %d per CPU, or between 1 and %d)", a.Slots, SlotsPerCPU, maxSlots))
	}
	if a.LeaseMs < 1 || a.LeaseMs > maxLeaseMs {
		errs = append(errs, fmt.Errorf("admission.leaseMs: %d is out of range (must be between 1 and %d milliseconds)", a.LeaseMs, maxLeaseMs))
	}
	return errors.Join(errs...)
}

// NewGate builds the gate this configuration describes; nil when it is off.
func (a Admission) NewGate() *admission.Gate {
	slots := a.Slots
	switch {
	case slots < 0:
		return nil
	case slots == 0:
		slots = SlotsPerCPU * runtime.GOMAXPROCS(0)
	}
	return admission.New(slots, time.Duration(a.LeaseMs)*time.Millisecond)
}
