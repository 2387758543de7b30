package supervision

import (
	"errors"

	"github.com/asynkron/protoactor-go/actor"
)

// A Rule maps some failures to a directive: it reports the directive and
// true for a failure it matches, and false for one it does not. The reason
// is the value the child panicked with.
type Rule func(reason any) (actor.Directive, bool)

// Decide returns a decider that applies the first of rules that matches a
// failure. A failure no rule matches is restarted, as by protoactor's
// [actor.DefaultDecider]; end the list with [Default] to choose otherwise.
func Decide(rules ...Rule) actor.DeciderFunc {
	return func(reason any) actor.Directive {
		for _, r := range rules {
			if d, ok := r(reason); ok {
				return d
			}
		}
		return actor.RestartDirective
	}
}

// On matches a panic with an error that has an E in its chain, as
// [errors.As] finds it, so also when the error was wrapped.
// On[runtime.Error] matches the runtime's own panics (nil dereference, index
// out of range).
func On[E error](d actor.Directive) Rule {
	return func(reason any) (actor.Directive, bool) {
		err, ok := reason.(error)
		if !ok {
			return 0, false
		}
		var target E
		return d, errors.As(err, &target)
	}
}

// Is matches a panic with an error that is target, or wraps it, as
// [errors.Is] finds it. For sentinel errors.
func Is(target error, d actor.Directive) Rule {
	return func(reason any) (actor.Directive, bool) {
		err, ok := reason.(error)
		return d, ok && errors.Is(err, target)
	}
}

// OnValue matches a panic with a value whose type is T, such as the string
// of panic("..."). It does not look into errors' chains: for errors use [On].
func OnValue[T any](d actor.Directive) Rule {
	return func(reason any) (actor.Directive, bool) {
		_, ok := reason.(T)
		return d, ok
	}
}

// Default matches every failure. Put it last.
func Default(d actor.Directive) Rule {
	return func(any) (actor.Directive, bool) { return d, true }
}
