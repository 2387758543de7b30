package e2ekit

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"

	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

// CheckModuleRoot fails the test unless root, the module root the suite
// found above its own directory, has a go.mod.
func CheckModuleRoot(t testing.TB, suite, root string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("%s: the module root %s has no go.mod: %v", suite, root, err)
	}
}

// Build builds ./cmd/dsh-actors of the module at root into bin, with the
// race detector when the test runs under it (so the server runs with it
// too).
func Build(t testing.TB, suite, root, bin string) {
	t.Helper()
	args := []string{"build", "-buildvcs=false", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "./cmd/dsh-actors")...)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: go build ./cmd/dsh-actors: %v\n%s", suite, err, out)
	}
}

// GORACE is the environment entry of a server the test starts: race
// reports go to files under the prefix race, which CheckRaces reads, and a
// server under -race does not sleep a second as it exits.
func GORACE(race string) string {
	return "GORACE=atexit_sleep_ms=0 log_path=" + race
}

// CheckRaces fails the test with every race report a server wrote under
// the prefix race.
func CheckRaces(t testing.TB, suite, race string) {
	t.Helper()
	files, _ := filepath.Glob(race + ".*")
	for _, f := range files {
		b, _ := os.ReadFile(f)
		t.Errorf("%s: the race detector reported in a dsh-actors server (%s):\n%s", suite, filepath.Base(f), b)
	}
}

var exactVersion = regexp.MustCompile(`^\d+\.\d+\.\d+$`)

// PinnedVersions returns the dependencies of the package.json at path, each
// of which must be pinned to an exact version.
func PinnedVersions(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var p struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	for name, v := range p.Dependencies {
		if !exactVersion.MatchString(v) {
			return nil, fmt.Errorf("%s: %s must be pinned to an exact version, not %q", path, name, v)
		}
	}
	return p.Dependencies, nil
}

// InstalledVersion returns the version of the package.json at path, an
// installed package's (node_modules/NAME/package.json).
func InstalledVersion(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var p struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return "", fmt.Errorf("%s: %v", path, err)
	}
	return p.Version, nil
}

// Mark returns a process mark (an environment entry, testkit.ProcessMark)
// for what a test starts. At the end of the test (after every other
// cleanup) a process that still carries it fails the test and is then
// killed, so that a failure leaves nothing behind on the machine. Call it
// before anything whose cleanup must run before that check.
func Mark(t *testing.T) string {
	t.Helper()
	var entry string
	// Registered first, so it runs last: after ProcessMark's check.
	t.Cleanup(func() {
		for _, p := range testkit.MarkedProcesses(entry) {
			var pid int
			if _, err := fmt.Sscan(p, &pid); err == nil && pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	entry = testkit.ProcessMark(t)
	return entry
}

// RandomToken returns a fresh bearer token: 16 random bytes in hex.
func RandomToken(t testing.TB) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}
