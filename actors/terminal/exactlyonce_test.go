package terminal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/internal/hosttest"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

// Every byte a program prints lands in exactly one result (open, send, read,
// task_output, close), however the calls race: reads beside each other,
// beside foreground sends and beside background tasks. A background job of
// the terminal's shell prints numbered tokens all along; each token must
// come back once, no more, no less.
func TestEveryByteLandsInExactlyOneResult(t *testing.T) {
	const tokens = 400
	f, id, got, seed := startTokens(t, tokens, "0.001")
	keep := got.keep

	// call is f.call for goroutines: a failure is reported, not fatal.
	call := func(tool string, args map[string]any) (result, bool) {
		b, _ := json.Marshal(args)
		r, err := f.h.Call(hosttest.Context(t), "a", tool, b)
		if err != nil {
			t.Errorf("%s %s: %v", tool, b, err)
			return result{}, false
		}
		res := result{text: r.Text, isErr: r.IsError}
		_ = json.Unmarshal(r.Data, &res.data)
		return res, true
	}
	// refused is a call turned away because another holds the terminal: it
	// carries no output.
	refused := func(r result) bool {
		return r.isErr && r.data["busy"] == true
	}

	var wg sync.WaitGroup
	for g := range 4 {
		rng := rand.New(rand.NewPCG(seed, uint64(g)))
		wg.Go(func() {
			for i := range 25 {
				switch op := rng.IntN(6); {
				case op < 3: // a read, waiting a little or not at all
					r, ok := call("terminal_read", map[string]any{"terminal_id": id, "wait_ms": []int{0, 5, 50}[rng.IntN(3)]})
					if ok && !refused(r) {
						keep(r.text)
					}
				case op < 5: // a foreground send
					r, ok := call("terminal_send", map[string]any{"terminal_id": id, "text": fmt.Sprintf("echo s-%d-%d", g, i), "keys": []string{"Enter"}, "wait_ms": 5000})
					if ok && !refused(r) {
						keep(r.text)
					}
				default: // a background task, collected to its end
					r, ok := call("terminal_send", map[string]any{"terminal_id": id, "text": fmt.Sprintf("echo b-%d-%d", g, i), "keys": []string{"Enter"}, "run_in_background": true})
					if !ok || refused(r) {
						continue
					}
					keep(r.text)
					task, _ := r.data["task_id"].(string)
					for range 100 {
						o, ok := call("task_output", map[string]any{"task_id": task, "wait_ms": 2000})
						if !ok {
							break
						}
						keep(o.text)
						if o.data["running"] == false {
							break
						}
					}
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// bash's wait returns when the job has printed everything.
	keep(f.call("terminal_send", fmt.Sprintf(`{"terminal_id":%q,"text":"wait","keys":["Enter"],"wait_ms":60000}`, id)).text)
	keep(f.call("terminal_close", fmt.Sprintf(`{"terminal_id":%q}`, id)).text)

	if !strings.Contains(got.String(), "<Tend>") {
		t.Fatalf("the job's last line never came:\n%s", got.String())
	}
	got.eachTokenOnce(t, tokens)
}

// startTokens opens a terminal whose shell runs a background job printing
// <T1> to <Ttokens>, a pause apart, then <Tend>; got has every result so
// far. seed is for the test's random choices, and logged.
func startTokens(t *testing.T, tokens int, pause string) (f *fixture, id string, got *ledger, seed uint64) {
	seed = uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	f = newFixture(t, nil)
	id, first := f.open(`{}`)
	got = &ledger{}
	got.keep(first.text)
	job := fmt.Sprintf(`(for i in $(seq 1 %d); do printf '<T%%d>\n' $i; sleep %s; done; printf '<T%%s>\n' end) &`, tokens, pause)
	got.keep(f.send(id, job, "Enter").text)
	return f, id, got, seed
}

// ledger collects the text of results, from any goroutine.
type ledger struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *ledger) keep(text string) {
	l.mu.Lock()
	l.b.WriteString(text + "\n")
	l.mu.Unlock()
}

func (l *ledger) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// eachTokenOnce fails unless each of <T1> to <Ttokens> came back once.
func (l *ledger) eachTokenOnce(t *testing.T, tokens int) {
	t.Helper()
	got := l.String()
	seen := make(map[string]int)
	for _, m := range regexp.MustCompile(`<T(\d+)>`).FindAllStringSubmatch(got, -1) {
		seen[m[1]]++
	}
	var bad []string
	for i := 1; i <= tokens; i++ {
		if n := seen[fmt.Sprint(i)]; n != 1 {
			bad = append(bad, fmt.Sprintf("<T%d> %d times", i, n))
		}
	}
	if len(bad) > 0 {
		t.Fatalf("tokens not returned exactly once: %s\nresults:\n%s", strings.Join(bad, ", "), got)
	}
}

// A terminal_close whose program outlives SIGHUP answers the calls waiting
// on it first, and returns only what they did not take.
func TestACloseReturnsNothingAWaitingCallTook(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Terminal.KillGraceMs = 300 })
	for _, holder := range []string{"send", "task"} {
		id, _ := f.open(`{"command":"trap '' HUP; while read -r l; do eval \"$l\"; done"}`)
		text := `for i in $(seq 1 20); do printf '<T%d>\n' $i; done; sleep 600`
		args := map[string]any{"terminal_id": id, "text": text, "keys": []string{"Enter"}, "wait_ms": 60000}
		if holder == "task" {
			args = map[string]any{"terminal_id": id, "text": text, "keys": []string{"Enter"}, "run_in_background": true}
		}
		b, _ := json.Marshal(args)
		got := make(chan string, 1)
		var task string
		if holder == "send" {
			go func() {
				r, err := f.h.Call(hosttest.Context(t), "a", "terminal_send", b)
				if err != nil {
					got <- err.Error()
					return
				}
				got <- r.Text
			}()
		} else {
			r := f.call("terminal_send", string(b))
			task, _ = r.data["task_id"].(string)
		}
		// The program has printed everything once a page shows the last token.
		testkit.Eventually(t, "the last token in the history", func() (bool, string) {
			page := f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q,"offset":0}`, id)).text
			return strings.Contains(page, "<T20>\n"), page
		})
		all := f.call("terminal_close", fmt.Sprintf(`{"terminal_id":%q}`, id)).text
		if holder == "send" {
			all += <-got
		} else {
			for range 50 {
				o := f.call("task_output", fmt.Sprintf(`{"task_id":%q}`, task))
				all += o.text
				if o.data["running"] == false {
					break
				}
			}
		}
		for i := 1; i <= 20; i++ {
			if n := strings.Count(all, fmt.Sprintf("<T%d>\n", i)); n != 1 {
				t.Fatalf("%s: <T%d> came back %d times:\n%s", holder, i, n, all)
			}
		}
	}
}

// The same when callers give up at any moment, answered or not: output an
// answer carried to a caller that had gone comes again in the next result,
// or that result says which bytes to page.
func TestWithdrawnCallsLoseNoOutput(t *testing.T) {
	const tokens = 300
	f, id, got, seed := startTokens(t, tokens, "0.002")
	keep := got.keep

	var wg sync.WaitGroup
	for g := range 3 {
		rng := rand.New(rand.NewPCG(seed, uint64(g)))
		wg.Go(func() {
			for i := range 40 {
				var tool string
				args := map[string]any{"terminal_id": id}
				switch rng.IntN(4) {
				case 0, 1:
					tool, args["wait_ms"] = "terminal_read", rng.IntN(20)
				case 2:
					tool, args["text"], args["keys"], args["wait_ms"] = "terminal_send", fmt.Sprintf("echo s-%d-%d", g, i), []string{"Enter"}, 2000
				default:
					tool, args["text"], args["keys"], args["run_in_background"] = "terminal_send", fmt.Sprintf("echo b-%d-%d", g, i), []string{"Enter"}, true
				}
				ctx, cancel := context.WithTimeout(hosttest.Context(t), time.Duration(rng.IntN(3000))*time.Microsecond)
				b, _ := json.Marshal(args)
				r, err := f.h.Call(ctx, "a", tool, b)
				cancel()
				if err == nil {
					keep(r.Text)
				}
				// Every task is collected, to its end, by calls that may
				// give up too.
				for _, task := range regexp.MustCompile(`(task-\d+) on `+id+`, running`).FindAllStringSubmatch(f.call("task_list", `{}`).text, -1) {
					for range 100 {
						ctx, cancel := context.WithTimeout(hosttest.Context(t), time.Duration(rng.IntN(3000))*time.Microsecond)
						r, err := f.h.Call(ctx, "a", "task_output", json.RawMessage(fmt.Sprintf(`{"task_id":%q,"wait_ms":50}`, task[1])))
						cancel()
						if err == nil {
							keep(r.Text)
							if strings.Contains(r.Text, task[1]+" finished") {
								break
							}
						}
					}
				}
			}
		})
	}
	wg.Wait()
	// What was left: the tasks' last output, the job's end, and the pages
	// that notices point to.
	for _, task := range regexp.MustCompile(`(task-\d+) on `).FindAllStringSubmatch(f.call("task_list", `{}`).text, -1) {
		for range 100 {
			o := f.call("task_output", fmt.Sprintf(`{"task_id":%q,"wait_ms":1000}`, task[1]))
			keep(o.text)
			if o.data["running"] == false {
				break
			}
		}
	}
	keep(f.call("terminal_send", fmt.Sprintf(`{"terminal_id":%q,"text":"wait","keys":["Enter"],"wait_ms":60000}`, id)).text)
	so := got.String()
	for _, n := range regexp.MustCompile(`\[output bytes (\d+)-(\d+) went to a call cancelled as it was answered`).FindAllStringSubmatch(so, -1) {
		from, to := n[1], n[2]
		page := f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q,"offset":%s,"limit":%s}`, id, from, fmt.Sprint(atoi(t, to)-atoi(t, from))))
		keep(page.text)
	}
	keep(f.call("terminal_close", fmt.Sprintf(`{"terminal_id":%q}`, id)).text)
	got.eachTokenOnce(t, tokens)
}

func atoi(t *testing.T, s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
