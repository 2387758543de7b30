// Package testkit holds the helpers that tests of dsh-actors share: a real
// [actor.ActorSystem] with a quiet logger, a probe actor that turns the
// messages it receives into a channel the test can wait on, a subscription to
// supervision decisions, and the goroutine-leak options every package passes to
// goleak.
//
// Everything here waits with a deadline and fails the test when the deadline
// passes; nothing sleeps. [Timeout] is a deadline long enough that a healthy
// test never reaches it, even under -race on a loaded machine.
//
// A package's tests start with
//
//	func TestMain(m *testing.M) { testkit.Main(m) }
//
// # Logging
//
// The system built by [NewSystem] logs nowhere. Set DSH_TEST_LOG=1 to send
// protoactor's log, at Debug and above, to standard error.
//
// # Missing prerequisites
//
// A test that needs something outside Go (Node and an npm install, promtool,
// tmux) calls [Missing] when it is not there: the test fails with a message
// naming what to install, unless DSH_TEST_SKIP names its suite. go test
// shows a skip only under -v, so a skipped suite would pass for `ok`.
//
// # Goroutines
//
// testkit starts no goroutine of its own. The actors it spawns run on
// protoactor's dispatcher, which starts a goroutine while a mailbox has work and
// lets it end when the mailbox is empty. Every actor and subscription testkit
// creates is stopped or removed by a t.Cleanup function registered when it is
// created, and that function waits until the actor has stopped.
package testkit
