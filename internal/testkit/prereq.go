package testkit

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// SkipVariable lists, comma-separated, the test suites whose missing
// prerequisites skip them instead of failing them: "e2e" (Node and
// e2e/node_modules), "hosts" (Node and e2e/hosts/node_modules), "promtool"
// (Debian's prometheus), "tmux".
const SkipVariable = "DSH_TEST_SKIP"

// Missing ends a test whose prerequisite is missing. msg says what is
// missing and how to install it. The test fails, since go test prints a
// skip only under -v and `ok` otherwise, unless $DSH_TEST_SKIP names suite:
// then it is skipped. With $CI "true" it fails whatever $DSH_TEST_SKIP says:
// CI installs everything (.ci/run).
func Missing(t testing.TB, suite, msg string) {
	t.Helper()
	optedOut := slices.ContainsFunc(strings.Split(os.Getenv(SkipVariable), ","), func(s string) bool {
		return strings.TrimSpace(s) == suite
	})
	switch {
	case optedOut && os.Getenv("CI") == "true":
		t.Fatalf("%s\n(%s=%s is not honoured when CI=true)", msg, SkipVariable, os.Getenv(SkipVariable))
	case optedOut:
		t.Skipf("%s (skipped: %s names %s)", msg, SkipVariable, suite)
	default:
		t.Fatalf("%s\n(set %s=%s to skip instead)", msg, SkipVariable, suite)
	}
}
