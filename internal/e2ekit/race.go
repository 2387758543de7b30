//go:build race

package e2ekit

// raceEnabled: the test runs under -race, so the server is built with it too.
const raceEnabled = true
