//go:build !race

package e2ekit

const raceEnabled = false
