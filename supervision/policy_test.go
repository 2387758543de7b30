package supervision_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dsh-actors/dsh-actors/supervision"
)

func TestPolicyValidate(t *testing.T) {
	if err := (supervision.Policy{}).Validate(); err != nil {
		t.Errorf("zero policy: %v", err)
	}
	for _, tc := range []struct {
		policy supervision.Policy
		field  string
		value  string // as printed in the message
	}{
		{supervision.Policy{Restart: 3}, "Restart", "3"},
		{supervision.Policy{MaxRestarts: -1}, "MaxRestarts", "-1"},
		{supervision.Policy{Within: -time.Second}, "Within", "-1s"},
		{supervision.Policy{Backoff: supervision.Backoff{Min: -time.Millisecond}}, "Backoff.Min", "-1ms"},
		{supervision.Policy{Backoff: supervision.Backoff{Max: -time.Millisecond}}, "Backoff.Max", "-1ms"},
		{supervision.Policy{Backoff: supervision.Backoff{Min: time.Second, Max: time.Millisecond}}, "Backoff.Max", "1ms"},
		{supervision.Policy{Backoff: supervision.Backoff{Jitter: 1.5}}, "Backoff.Jitter", "1.5"},
		{supervision.Policy{Backoff: supervision.Backoff{Jitter: -0.1}}, "Backoff.Jitter", "-0.1"},
		{supervision.Policy{Backoff: supervision.Backoff{Jitter: math.NaN()}}, "Backoff.Jitter", "NaN"},
		{supervision.Policy{OnLimit: 2}, "OnLimit", "2"},
	} {
		err := tc.policy.Validate()
		var pe *supervision.PolicyError
		if !errors.As(err, &pe) {
			t.Errorf("%+v: got %v, want a *PolicyError", tc.policy, err)
			continue
		}
		msg := err.Error()
		if pe.Field != tc.field || !strings.Contains(msg, "Policy."+tc.field+" is "+tc.value+": must") {
			t.Errorf("%+v: got %q (field %s), want field %s with value %s and a rule", tc.policy, msg, pe.Field, tc.field, tc.value)
		}
		if _, err := supervision.New(tc.policy); err == nil {
			t.Errorf("New(%+v) accepted it", tc.policy)
		}
	}
}

func TestPolicyValidateReportsEveryField(t *testing.T) {
	err := supervision.Policy{MaxRestarts: -1, Within: -1}.Validate()
	for _, field := range []string{"MaxRestarts", "Within"} {
		if err == nil || !strings.Contains(err.Error(), "Policy."+field) {
			t.Errorf("error %v does not name %s", err, field)
		}
	}
}

func TestSetPolicyValidates(t *testing.T) {
	s, err := supervision.New(supervision.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetPolicy(nil, supervision.Policy{MaxRestarts: -2}); err == nil {
		t.Error("SetPolicy accepted MaxRestarts -2")
	}
}

func TestBackoffDelay(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		b    supervision.Backoff
		n    int
		want time.Duration
	}{
		{supervision.Backoff{}, 1, 0},
		{supervision.Backoff{Max: time.Second}, 3, 0},
		{supervision.Backoff{Min: 10 * ms}, 0, 0},
		{supervision.Backoff{Min: 10 * ms}, 1, 10 * ms},
		{supervision.Backoff{Min: 10 * ms}, 2, 20 * ms},
		{supervision.Backoff{Min: 10 * ms}, 4, 80 * ms},
		{supervision.Backoff{Min: 10 * ms, Max: 25 * ms}, 2, 20 * ms},
		{supervision.Backoff{Min: 10 * ms, Max: 25 * ms}, 3, 25 * ms},
		{supervision.Backoff{Min: 10 * ms, Max: 25 * ms}, 1000, 25 * ms},
		{supervision.Backoff{Min: 10 * ms}, 1000, math.MaxInt64}, // no overflow
	} {
		if got := tc.b.Delay(tc.n); got != tc.want {
			t.Errorf("%+v.Delay(%d) = %v, want %v", tc.b, tc.n, got, tc.want)
		}
	}
}

func TestBackoffJitterShortensWithinBounds(t *testing.T) {
	b := supervision.Backoff{Min: 100 * time.Millisecond, Jitter: 0.5}
	shorter := false
	for range 200 {
		d := b.Delay(1)
		if d < 50*time.Millisecond || d > 100*time.Millisecond {
			t.Fatalf("delay %v outside [50ms, 100ms]", d)
		}
		shorter = shorter || d < 100*time.Millisecond
	}
	if !shorter {
		t.Error("200 delays with Jitter 0.5 were all exactly Min")
	}
}

func TestStrings(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{supervision.Permanent.String(), "permanent"},
		{supervision.Transient.String(), "transient"},
		{supervision.Temporary.String(), "temporary"},
		{supervision.RestartType(7).String(), "RestartType(7)"},
		{supervision.Escalate.String(), "escalate"},
		{supervision.StopChild.String(), "stop child"},
		{supervision.LimitAction(9).String(), "LimitAction(9)"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
